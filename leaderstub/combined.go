package leaderstub

import (
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// RegisterBeside registers the leader's APIs on the listener of a node
// that already serves others: the coordinator node leading partitions as a
// KRaft combined node does. A key the node serves already keeps its
// handler (InitProducerId: the coordinator allocates producer ids itself),
// except the two that name partitions, WriteTxnMarkers and
// DescribeProducers, which the group coordinator registers for
// __consumer_offsets: their requests are split by topic, __consumer_offsets
// to the handler registered before and every other topic to this leader,
// and the answers joined in the request's shape.
func (l *Leader) RegisterBeside(reg *wire.Registry) {
	for _, a := range apis {
		if _, _, ok := reg.Range(a.Key); !ok {
			reg.Register(a.Key, a.Min, a.Max, a.Bind(l))
			continue
		}
		if a.Key == writeTxnMarkersAPI.Key || a.Key == describeProducersAPI.Key {
			mine := a.Bind(l)
			reg.Wrap(a.Key, func(offsets wire.Handler) wire.Handler { return besideOffsets(offsets, mine) })
		}
	}
	reg.OnDisconnect(l.connectionEnded)
}

// besideOffsets sends the __consumer_offsets partitions of a request to
// offsets and the others to mine, and joins the answers in the request's
// shape.
func besideOffsets(offsets, mine wire.Handler) wire.Handler {
	return wire.PartitionSplit[bool]{
		Dest: func(topic string, _ int32) bool { return topic == cluster.OffsetsTopic },
		Handler: func(toOffsets bool) wire.Handler {
			if toOffsets {
				return offsets
			}
			return mine
		},
		Empty: true,
	}.Serve
}
