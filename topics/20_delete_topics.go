package topics

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// DeleteTopics (key 20), v0–v6, served by the controller.
//
// Behavior (Kafka's ControllerApis.deleteTopics):
//   - a name or id given twice: INVALID_REQUEST "Duplicate topic name." /
//     "Duplicate topic id."; both a name and an id, or neither: INVALID_REQUEST;
//   - an unknown name: UNKNOWN_TOPIC_OR_PARTITION; an unknown id:
//     UNKNOWN_TOPIC_ID; __consumer_offsets: INVALID_REQUEST (txncoord's
//     offsets topic is the cluster file's);
//   - the answer comes once the deletion is durable and the topic has left
//     the view; its leaders then drop its partitions' data (in `txncoord up`
//     at once; a leader in a process of its own at its next poll, within a
//     second). Answers are in request order (Kafka shuffles them).
//
// Version notes: v5 adds error messages; v6 names topics by name or id
// (Topics) instead of TopicNames, and answers the topic id.
var deleteTopicsAPI = wire.API[*Controller]{Key: 20, Min: 0, Max: 6, Handle: (*Controller).handleDeleteTopics}

func (c *Controller) handleDeleteTopics(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	add := func(name *string, id [16]byte, err *kerr.Error, msg string) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = name, id
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = err.Code, kmsg.StringPtr(msg)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// One entry per topic to delete, resolved to a name.
	type entry struct {
		name *string
		id   [16]byte
		byID bool
	}
	var entries []entry
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			entries = append(entries, entry{name: kmsg.StringPtr(n)})
		}
	} else {
		for _, t := range req.Topics {
			switch {
			case t.Topic == nil && t.TopicID == [16]byte{}:
				add(nil, t.TopicID, kerr.InvalidRequest, "Neither topic name nor id were specified.")
			case t.Topic != nil && t.TopicID != [16]byte{}:
				add(t.Topic, t.TopicID, kerr.InvalidRequest, "You may not specify both topic name and topic id.")
			default:
				entries = append(entries, entry{name: t.Topic, id: t.TopicID, byID: t.Topic == nil})
			}
		}
	}
	names, ids := map[string]int{}, map[[16]byte]int{}
	for _, e := range entries {
		if e.byID {
			ids[e.id]++
		} else {
			names[*e.name]++
		}
	}
	var todo []string
	var todoIDs [][16]byte
	for _, e := range entries {
		switch {
		case e.byID && ids[e.id] > 1:
			add(nil, e.id, kerr.InvalidRequest, "Duplicate topic id.")
		case !e.byID && names[*e.name] > 1:
			add(e.name, e.id, kerr.InvalidRequest, "Duplicate topic name.")
		case e.byID:
			name, ok := c.NameOf(e.id)
			// A topic id the principal may not delete is as unknown
			// (Kafka does not confirm that it exists).
			if !ok || !wire.Authorize(r, kmsg.ACLOperationDelete, wire.TopicResource(name)) {
				add(nil, e.id, kerr.UnknownTopicID, "This server does not host this topic ID.")
				continue
			}
			todo, todoIDs = append(todo, name), append(todoIDs, e.id)
		case !wire.Authorize(r, kmsg.ACLOperationDelete, wire.TopicResource(*e.name)):
			add(e.name, e.id, kerr.TopicAuthorizationFailed, "Authorization failed.")
		default:
			todo, todoIDs = append(todo, *e.name), append(todoIDs, [16]byte{})
		}
	}
	for i, res := range c.Delete(ctx, todo) {
		id := todoIDs[i]
		if res.Err == nil {
			id = res.Info.id
		}
		if res.Err != nil {
			add(kmsg.StringPtr(res.Name), id, res.Err, res.Msg)
		} else {
			add(kmsg.StringPtr(res.Name), id, nil, "")
		}
	}
	return wire.Now(resp)
}
