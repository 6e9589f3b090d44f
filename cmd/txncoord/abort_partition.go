package main

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
)

// partitionAbort is the transaction `txn abort --topic` ends at one
// partition: what its leader's DescribeProducers says of it, or what the
// flags name.
type partitionAbort struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	StartOffset      int64  `json:"start_offset"` // -1: named by producer id
}

// abortSpecFromFlags reads --partition and either --start-offset or
// --producer-id, --producer-epoch and --coordinator-epoch, as
// kafka-transactions.sh abort does.
func abortSpecFromFlags(c *cli.Context) (partitionAbort, error) {
	a := partitionAbort{Topic: c.String("topic"), Partition: int32(c.Int("partition")), StartOffset: c.Int64("start-offset"), ProducerID: c.Int64("producer-id")}
	switch {
	case a.Topic == "":
		return a, usagef("--topic: want a topic name")
	case c.IsSet("transactional-id"):
		return a, usagef("give either --transactional-id or --topic, not both")
	case a.Partition < 0:
		return a, usagef("--partition is required with --topic")
	case c.IsSet("start-offset") == c.IsSet("producer-id"):
		return a, usagef("name the transaction with either --start-offset or --producer-id, --producer-epoch and --coordinator-epoch")
	case c.IsSet("start-offset") && a.StartOffset < 0:
		return a, usagef("--start-offset %d: want an offset >= 0", a.StartOffset)
	case c.IsSet("start-offset"):
		return a, nil
	}
	epoch, coordinatorEpoch := c.Int("producer-epoch"), c.Int("coordinator-epoch")
	switch {
	case a.ProducerID < 0:
		return a, usagef("--producer-id %d: want an id >= 0", a.ProducerID)
	case !c.IsSet("producer-epoch") || epoch < 0 || epoch > math.MaxInt16:
		return a, usagef("--producer-epoch: want the producer's epoch, 0 to %d", math.MaxInt16)
	case !c.IsSet("coordinator-epoch") || coordinatorEpoch < -1 || coordinatorEpoch > math.MaxInt32:
		return a, usagef("--coordinator-epoch: want the coordinator epoch DescribeProducers shows, -1 or more")
	}
	// A transaction that hung before its first marker shows coordinator
	// epoch -1; 0 is at most any epoch a leader has seen.
	a.ProducerEpoch, a.CoordinatorEpoch, a.StartOffset = int16(epoch), int32(max(coordinatorEpoch, 0)), -1
	return a, nil
}

// partitionAbortAction writes an ABORT marker for one transaction straight
// to one partition's leader, as kafka-transactions.sh abort does for a
// hanging transaction: the leader ends it there whatever the coordinator
// knows.
func partitionAbortAction(c *cli.Context) error {
	return adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
		a, err := abortSpecFromFlags(c)
		if err != nil {
			return err
		}
		r, err := connectLeaders(ctx, c, cl)
		if err != nil {
			return err
		}
		defer r.close()
		set, err := r.partitions(ctx, selection{brokerID: -1, topic: a.Topic, partition: a.Partition})
		if err != nil {
			return err
		}
		if a.StartOffset >= 0 {
			if a, err = r.openTxnAt(ctx, set, a); err != nil {
				return err
			}
		}
		if !c.Bool("yes") {
			if err := confirmAbortOf(c, fmt.Sprintf("the transaction of producer id %d at %s-%d", a.ProducerID, a.Topic, a.Partition),
				fmt.Sprintf("This will write an ABORT marker for producer id %d (epoch %d, coordinator epoch %d) to %s-%d at its leader, without the coordinator: the transaction's records there will never be visible to read_committed consumers.",
					a.ProducerID, a.ProducerEpoch, a.CoordinatorEpoch, a.Topic, a.Partition)); err != nil {
				return err
			}
		}
		resp, err := r.adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: a.ProducerID, ProducerEpoch: a.ProducerEpoch,
			CoordinatorEpoch: a.CoordinatorEpoch, Topics: kadm.TopicsSet{a.Topic: {a.Partition: {}}}})
		if err != nil {
			return fmt.Errorf("WriteTxnMarkers: %s", kafkaWords(err))
		}
		answered := false
		for _, p := range resp.SortedPartitions() {
			if p.Topic != a.Topic || p.Partition != a.Partition {
				continue
			}
			if p.Err != nil {
				return fmt.Errorf("WriteTxnMarkers: %s-%d: leader %d answered %s", p.Topic, p.Partition, p.NodeID, kafkaWords(p.Err))
			}
			answered = true
		}
		if !answered {
			return fmt.Errorf("WriteTxnMarkers: no answer for %s-%d", a.Topic, a.Partition)
		}
		if out == "json" {
			return printJSON(c.App.Writer, a)
		}
		_, err = fmt.Fprintf(c.App.Writer, "aborted the transaction of producer id %d (epoch %d) at %s-%d\n", a.ProducerID, a.ProducerEpoch, a.Topic, a.Partition)
		return err
	})(c)
}

// openTxnAt finds the producer whose open transaction at a's partition
// starts at a.StartOffset, as its leader describes it.
func (r *leaderReader) openTxnAt(ctx context.Context, set kadm.TopicsSet, a partitionAbort) (partitionAbort, error) {
	described, err := r.describeProducers(ctx, set)
	if err != nil {
		return a, err
	}
	for _, d := range described.SortedProducers() {
		if d.Topic == a.Topic && d.Partition == a.Partition && d.CurrentTxnStartOffset == a.StartOffset {
			a.ProducerID, a.ProducerEpoch, a.CoordinatorEpoch = d.ProducerID, d.ProducerEpoch, max(d.CoordinatorEpoch, 0)
			return a, nil
		}
	}
	return a, fmt.Errorf("no open transaction starts at offset %d on %s-%d (txncoord producers --topic %s --partition %d lists the open ones)",
		a.StartOffset, a.Topic, a.Partition, a.Topic, a.Partition)
}
