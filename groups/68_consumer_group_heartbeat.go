package groups

// ConsumerGroupHeartbeat (key 68), v0–v1: the KIP-848 consumer protocol.
//
// Behavior (consumer.go has the state machine):
//   - epoch 0 joins (creating the group, or converting an Empty classic
//     one); a positive epoch heartbeats; -1 leaves; -2 is a static
//     member's temporary leave (it keeps its partitions until its session
//     expires or a new member with its group.instance.id joins);
//   - every answer carries the heartbeat interval
//     (Timeouts.ConsumerHeartbeat) and the member's epoch; the assignment
//     (topic ids and partitions) when the request was a full one or the
//     member's assignment changed;
//   - a partition moves only once its previous owner revoked it: a member
//     keeps its epoch until it no longer reports the partitions it must
//     give up (fenced after its rebalance timeout), and is given a
//     partition only once no other member owns it;
//   - errors: INVALID_REQUEST (Kafka's request checks, with its
//     messages), UNSUPPORTED_ASSIGNOR (only "uniform" and "range"),
//     INVALID_REGULAR_EXPRESSION, GROUP_ID_NOT_FOUND (no such group, or a
//     classic one with members), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
//     FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID (another member still
//     holds the instance id: it must leave with -2 first);
//   - a heartbeat that changed the group (a join, a leave, a new epoch,
//     an assignment step) is answered once its record is durable; one that
//     changed nothing at once. Groups are not authorized per principal (as
//     the classic group APIs here).
//
// Version notes: v1 adds SubscribedTopicRegex (RE2, matched against whole
// topic names) and requires the client to name its member (KIP-1082); v0
// members get an id from the coordinator. Served only by nodes whose
// Kafka version profile has v1 (4.0+, where KIP-848 is generally
// available; 3.7–3.9 had it as an early-access preview, off by default).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/wire"
)

// consumerGroupHeartbeatAPI is ConsumerGroupHeartbeat v0–v1.
var consumerGroupHeartbeatAPI = wire.API[*Coordinator]{Key: 68, Min: 0, Max: 1, Handle: (*Coordinator).handleConsumerGroupHeartbeat}

func (c *Coordinator) handleConsumerGroupHeartbeat(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if deny := groupDenied(r, kmsg.ACLOperationRead, req.Group); deny != nil {
		return deny
	}
	hr := HeartbeatRequest{Version: req.Version, Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: req.InstanceID, RackID: req.RackID, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		Topics: req.SubscribedTopicNames, Assignor: req.ServerAssignor, ClientID: str(r.ClientID), ClientHost: clientHost(r)}
	if req.Version >= 1 {
		hr.Regex = req.SubscribedTopicRegex
	}
	if req.Topics != nil {
		hr.Owned = make([]OwnedTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			hr.Owned = append(hr.Owned, OwnedTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	var res HeartbeatResult
	pos, err := c.step(func(now time.Time) { res = c.core.ConsumerHeartbeat(now, viewImage{c.cfg.View}, hr) })
	return func() (kmsg.Response, error) {
		if res.Err == 0 {
			if err == nil {
				err = c.durable(ctx, r, pos)
			}
			if err != nil {
				res = HeartbeatResult{Err: storeErrCode(err), ErrMsg: err.Error(), Interval: res.Interval}
			}
		}
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.HeartbeatIntervalMillis = res.Err, int32(res.Interval.Milliseconds())
		if res.ErrMsg != "" {
			resp.ErrorMessage = &res.ErrMsg
		}
		if res.Err != 0 {
			return resp, nil
		}
		id := res.MemberID
		resp.MemberID, resp.MemberEpoch = &id, res.Epoch
		if res.HasAssignment {
			a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
			a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, len(res.Assignment))
			for _, t := range res.Assignment {
				at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				at.TopicID, at.Partitions = t.TopicID, t.Partitions
				a.Topics = append(a.Topics, at)
			}
			resp.Assignment = &a
		}
		return resp, nil
	}
}

// viewImage is the cluster view as a consumer group step reads it.
type viewImage struct{ v *cluster.View }

func (i viewImage) TopicByName(name string) ([16]byte, int32, bool) {
	t, ok := i.v.Known(name)
	return t.ID, t.Partitions, ok
}

func (i viewImage) TopicByID(id [16]byte) (string, bool) {
	t, ok := i.v.TopicByID(id)
	return t.Name, ok
}

func (i viewImage) TopicNames() []string {
	ts := i.v.Topics()
	names := make([]string, len(ts))
	for k, t := range ts {
		names[k] = t.Name
	}
	return names
}

// ServesConsumerProtocol reports whether a node of this Kafka version
// serves the KIP-848 consumer protocol (4.0+).
func ServesConsumerProtocol(kafkaVersion string) bool {
	return negotiation.MaxVersion(kafkaVersion, 68) >= 1
}

// SetConsumerTimeouts changes the consumer groups' session timeout and
// heartbeat interval at run time, as Kafka's dynamic broker configs
// group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms
// do (zero keeps a value). A member's current session keeps its deadline;
// the next heartbeat uses the new values.
func (c *Coordinator) SetConsumerTimeouts(session, heartbeat time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if session > 0 {
		c.core.t.ConsumerSession = session
	}
	if heartbeat > 0 {
		c.core.t.ConsumerHeartbeat = heartbeat
	}
}
