package groups

import (
	"net"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// clientHost is Kafka's client host: "/" and the address.
func clientHost(r *wire.Request) string {
	if r.Remote == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(r.Remote.String())
	if err != nil {
		return "/" + r.Remote.String()
	}
	return "/" + host
}

// maxOffsetMetadata is Kafka's offset.metadata.max.bytes.
const maxOffsetMetadata = 4096

// partitionCode answers the partitions of a commit that are refused by
// themselves: an unknown topic or partition, metadata too long.
func (c *Coordinator) partitionCode(topic string, partition int32, metadata *string) int16 {
	t, ok := c.cfg.View.Topic(topic)
	if !ok || partition < 0 || partition >= t.Partitions {
		return kerr.UnknownTopicOrPartition.Code
	}
	if metadata != nil && len(*metadata) > maxOffsetMetadata {
		return kerr.OffsetMetadataTooLarge.Code
	}
	return 0
}

// commitCodes are the partitions of an OffsetCommit or TxnOffsetCommit
// refused by themselves (partitionCode), by the request's topic and
// partition index; 0 for the partitions the commit takes.
type commitCodes [][]int16

// of is the answer of topic i's partition j: its own refusal, else the
// commit's code.
func (cc commitCodes) of(i, j int, code int16) int16 {
	if cc[i][j] != 0 {
		return cc[i][j]
	}
	return code
}

// collectOffsets puts the partitions of a commit request into offsets,
// but those refused by themselves. OffsetCommit and TxnOffsetCommit share
// it: their kmsg types differ, their rules do not. parts gives a topic's
// name and partitions, part a partition's number, offset, leader epoch
// and metadata; the leader epoch is -1 unless the version has it.
func collectOffsets[T, P any](c *Coordinator, r *wire.Request, offsets map[TP]Offset, topics []T, parts func(T) (string, []P),
	part func(P) (int32, int64, int32, *string), hasEpoch bool) commitCodes {
	codes := make(commitCodes, len(topics))
	for i, t := range topics {
		topic, ps := parts(t)
		codes[i] = make([]int16, len(ps))
		// READ on the topic, as Kafka checks a commit's topics.
		readable := wire.Authorize(r, kmsg.ACLOperationRead, wire.TopicResource(topic))
		for j, p := range ps {
			partition, offset, epoch, metadata := part(p)
			if !readable {
				codes[i][j] = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if codes[i][j] = c.partitionCode(topic, partition, metadata); codes[i][j] != 0 {
				continue
			}
			if !hasEpoch {
				epoch = -1
			}
			offsets[TP{topic, partition}] = Offset{Offset: offset, LeaderEpoch: epoch, Metadata: str(metadata)}
		}
	}
	return codes
}

// offsetsPartition reports whether topic/partition is a partition of
// __consumer_offsets (the partitions this node leads).
func (c *Coordinator) offsetsPartitionCode(topic string, partition int32) int16 {
	if topic != cluster.OffsetsTopic {
		return kerr.NotLeaderForPartition.Code
	}
	if partition < 0 || partition >= c.cfg.View.OffsetsPartitions() {
		return kerr.UnknownTopicOrPartition.Code
	}
	return 0
}

// debugging reports whether the coordinator logs at debug level, checked
// before building a request's logger for a debug line (a logger per
// request is a cost on the commit path).
func (c *Coordinator) debugging() bool { return c.log.GetLevel() <= zerolog.DebugLevel }

// offsetsArr is offsets as topic/partition=offset[/error] strings, for a
// debug line.
func offsetsArr(n int, each func(i int) (TP, int64, int16)) *zerolog.Array {
	arr := zerolog.Arr()
	for i := range n {
		tp, off, code := each(i)
		s := tp.Topic + "/" + strconv.Itoa(int(tp.Partition)) + "=" + strconv.FormatInt(off, 10)
		if code != 0 {
			s += "/" + errName(code)
		}
		arr.Str(s)
	}
	return arr
}

// groupDenied answers a request GROUP_AUTHORIZATION_FAILED when its
// principal may not perform op on group (Kafka's KafkaApis checks before
// anything else), and is nil when it may.
func groupDenied(r *wire.Request, op kmsg.ACLOperation, group string) wire.Reply {
	if wire.Authorize(r, op, wire.GroupResource(group)) {
		return nil
	}
	return wire.Now(wire.UnservedResponse(r.Body, kerr.GroupAuthorizationFailed.Code))
}
