package node

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/txntimeline"
)

// apiTimeline is a recorded timeline as the admin API shows it.
func apiTimeline(events []txntimeline.Event) []admin.TimelineEvent {
	out := make([]admin.TimelineEvent, 0, len(events))
	for _, ev := range events {
		e := admin.TimelineEvent{AtMs: ev.AtMs, Event: ev.Kind.String(), ProducerID: ev.ProducerID, ProducerEpoch: ev.Epoch}
		switch ev.Kind {
		case txntimeline.PartitionAdded, txntimeline.MarkerSent, txntimeline.MarkerAnswered:
			e.Topic, e.Partition = ev.Topic, ptr(ev.Partition)
		}
		switch ev.Kind {
		case txntimeline.Prepare, txntimeline.Complete, txntimeline.MarkerSent, txntimeline.MarkerAnswered:
			e.Result = "abort"
			if ev.Commit {
				e.Result = "commit"
			}
		}
		switch ev.Kind {
		case txntimeline.MarkerSent:
			e.Leader, e.WriteTxnMarkersVersion = ptr(ev.Leader), ptr(ev.Version)
		case txntimeline.MarkerAnswered:
			e.Leader = ptr(ev.Leader)
			switch {
			case ev.ErrorCode == txntimeline.NoAnswer:
				e.Error = "NO_ANSWER"
			case ev.ErrorCode == 0:
				e.Error = "NONE"
			default:
				e.Error = kerr.ErrorForCode(ev.ErrorCode).Error()
				var ke *kerr.Error
				if errors.As(kerr.ErrorForCode(ev.ErrorCode), &ke) {
					e.Error = ke.Message
				}
			}
		}
		out = append(out, e)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// timelineOf is the timeline of id kept by the process's coordinator of it:
// this node, or, in a process running several (`txncoord up`), its peer.
func (c *Coordinator) timelineOf(owner int32) *txntimeline.Recorder {
	if owner == c.Node.NodeID {
		return c.Timeline
	}
	if p := c.peer(owner); p != nil {
		return p.Timeline
	}
	return nil
}
