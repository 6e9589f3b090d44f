package leaderstub

// Fetch (key 1), v4–v18.
//
// Behavior:
//   - read_uncommitted reads up to the high watermark (the durable log
//     end), read_committed up to the last stable offset, and gets the
//     aborted transactions that overlap the returned range;
//   - an offset below the log start or above the high watermark is
//     OFFSET_OUT_OF_RANGE;
//   - whole batches are returned, at least one even when it is larger than
//     the byte limits (KIP-74);
//   - the request waits up to MaxWaitMillis for MinBytes: the Reply waits,
//     woken whenever a watermark moves, so the connection's reader is free;
//   - no fetch sessions: every response has SessionID 0, so clients send
//     full fetches (Kafka does the same when its session cache is full);
//   - a partition's record set is zero-length, never null, when it has no
//     data or an error, at every version (librdkafka refuses a null one).
//
// Version notes: v7 sessions (not kept); v11 PreferredReadReplica -1;
// v12 flexible; v13+ topics by id (unknown id → UNKNOWN_TOPIC_ID).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wire"
)

const (
	fetchMinVersion = 4
	fetchMaxVersion = 18

	// maxFetchWait caps a client's MaxWaitMillis.
	maxFetchWait = 30 * time.Second
)

func (l *Leader) handleFetch(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.FetchRequest)
	version := r.Version
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
	return func() (kmsg.Response, error) {
		deadline := time.Now().Add(wait)
		for {
			changed := l.changes()
			resp, n, hasErr := l.fetchOnce(req, version)
			remaining := time.Until(deadline)
			if n >= int(req.MinBytes) || hasErr || remaining <= 0 {
				return resp, nil
			}
			timer := time.NewTimer(remaining)
			select {
			case <-changed:
			case <-timer.C:
			case <-ctx.Done():
			case <-r.Stopping: // the server is stopping: answer now
			case <-l.stop:
			}
			timer.Stop()
			if ctx.Err() != nil || l.stopped() || isClosed(r.Stopping) {
				resp, _, _ := l.fetchOnce(req, version)
				return resp, nil
			}
		}
	}
}

func (l *Leader) stopped() bool { return isClosed(l.stop) }

// fetchOnce builds a response from the current state; it returns the
// number of record bytes and whether a partition had an error.
func (l *Leader) fetchOnce(req *kmsg.FetchRequest, version int16) (*kmsg.FetchResponse, int, bool) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(version)
	budget := int(req.MaxBytes)
	if version < 3 || budget <= 0 {
		budget = 1 << 30
	}
	total, hasErr := 0, false
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name, topicErr := l.topicName(rt.Topic, rt.TopicID, version >= 13)
		for _, rp := range rt.Partitions {
			fp := kmsg.NewFetchResponseTopicPartition()
			fp.Partition = rp.Partition
			fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset, fp.PreferredReadReplica = -1, -1, -1, -1
			// Never null: librdkafka reads the record set's length as a
			// MessageSetSize that must be >= 0 and fails the whole
			// response on -1 (kmsg writes nil as null); Kafka answers an
			// empty or failed partition with MemoryRecords.EMPTY.
			fp.RecordBatches = []byte{}
			if topicErr != nil {
				fp.ErrorCode = topicErr.Code
			} else {
				n := l.fetchPartition(name, rp, req.IsolationLevel == 1, budget-total, total == 0, &fp)
				total += n
			}
			if fp.ErrorCode != 0 {
				hasErr = true
			}
			t.Partitions = append(t.Partitions, fp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, total, hasErr
}

// fetchPartition fills one partition's answer and returns its byte count.
func (l *Leader) fetchPartition(topic string, rp kmsg.FetchRequestTopicPartition, readCommitted bool, budget int, first bool, fp *kmsg.FetchResponseTopicPartition) int {
	p, kerrE := l.partitionFor(topic, rp.Partition)
	if kerrE != nil {
		fp.ErrorCode = kerrE.Code
		return 0
	}
	p.mu.RLock()
	hw, lso, logStart := p.hw, p.lso(), p.logStart
	fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = hw, lso, logStart
	if rp.FetchOffset < logStart || rp.FetchOffset > hw {
		p.mu.RUnlock()
		fp.ErrorCode = kerr.OffsetOutOfRange.Code
		return 0
	}
	upper := hw
	if readCommitted {
		upper = lso
	}
	limit := min(int(rp.PartitionMaxBytes), budget)
	// Each batch's bytes: in memory until the process log's applier has
	// written them to bbolt (batchIndex.raw), then in bbolt.
	var parts []fetchedBatch
	size := 0
	end := rp.FetchOffset
	inBolt := false
	for i := p.findBatch(rp.FetchOffset); i < len(p.batches) && p.batches[i].Base < upper; i++ {
		b := p.batches[i]
		if size+int(b.Size) > limit && (size > 0 || !first) {
			break
		}
		parts = append(parts, fetchedBatch{base: b.Base, raw: b.raw})
		inBolt = inBolt || b.raw == nil
		size += int(b.Size)
		end = b.Last + 1
	}
	if readCommitted {
		fp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		for _, a := range p.aborted {
			if a.LastOffset >= rp.FetchOffset && a.FirstOffset < end {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				fp.AbortedTransactions = append(fp.AbortedTransactions, at)
			}
		}
	}
	p.mu.RUnlock()
	if len(parts) == 0 {
		return 0
	}
	out := make([]byte, 0, size)
	read := func(log *bbolt.Bucket) {
		for _, b := range parts {
			v := b.raw
			if v == nil && log != nil {
				v = log.Get(u64(b.base))
			}
			if v == nil {
				break // dropped by retention meanwhile
			}
			out = append(out, v...)
		}
	}
	if !inBolt {
		read(nil)
	} else if err := l.space.View(func(r storage.Root) error {
		var log *bbolt.Bucket
		if root := r.Bucket(bucketPartitions); root != nil {
			if pb := root.Bucket(p.key); pb != nil {
				log = pb.Bucket(bucketLog)
			}
		}
		read(log)
		return nil
	}); err != nil {
		fp.ErrorCode = kerr.KafkaStorageError.Code
		return 0
	}
	fp.RecordBatches = out
	return len(out)
}

// isClosed reports whether ch is closed (nil: never).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fetchedBatch is one batch a Fetch returns: its bytes if still in
// memory, else read from bbolt at base.
type fetchedBatch struct {
	base int64
	raw  []byte
}
