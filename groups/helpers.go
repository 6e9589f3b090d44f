package groups

import (
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

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
