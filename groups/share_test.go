package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The share-group core: joins and leaves move the group epoch, a member
// gets the epoch and its assignment at its own heartbeat, every partition
// is assigned (shared when members outnumber them), sessions time out,
// and an id is one group type only.
func TestShareGroupCore(t *testing.T) {
	c := NewCore(Timeouts{}, 4, func() string { return "x" })
	img := fakeTopics{"jobs": 3}
	now := time.Unix(1_000_000, 0)
	hb := func(member string, epoch int32, topics ...string) ShareHeartbeatResult {
		r := ShareHeartbeatRequest{Group: "q", MemberID: member, MemberEpoch: epoch, SessionTimeout: 45 * time.Second, Interval: 5 * time.Second}
		if len(topics) > 0 {
			r.Topics = topics
		}
		return c.ShareHeartbeat(now, img, r)
	}
	parts := func(res ShareHeartbeatResult) string {
		var out []int32
		for _, a := range res.Assignment {
			out = append(out, a.Partitions...)
		}
		return fmt.Sprint(out)
	}

	if res := hb("a", 0); res.Err != kerr.InvalidRequest.Code {
		t.Fatalf("join without topics: %+v", res)
	}
	if res := hb("a", 3, "jobs"); res.Err != kerr.GroupIDNotFound.Code {
		t.Fatalf("heartbeat to no group: %+v", res)
	}
	a := hb("a", 0, "jobs")
	if a.Err != 0 || a.Epoch != 1 || parts(a) != "[0 1 2]" {
		t.Fatalf("first join: %+v", a)
	}
	b := hb("b", 0, "jobs")
	if b.Err != 0 || b.Epoch != 2 || parts(b) != "[1]" {
		t.Fatalf("second join: %+v (want partition 1: members in id order, p mod 2)", b)
	}
	// a learns the new epoch and its smaller assignment at its heartbeat.
	a = hb("a", 1)
	if a.Epoch != 2 || !a.HasAssignment || parts(a) != "[0 2]" {
		t.Fatalf("a after b joined: %+v", a)
	}
	// Nothing changed: no assignment in the answer.
	if a = hb("a", 2); a.HasAssignment || a.Epoch != 2 {
		t.Fatalf("steady heartbeat: %+v", a)
	}
	// The previous epoch is accepted (a lost answer), an older one fenced.
	if res := hb("a", 1); res.Err != 0 {
		t.Fatalf("previous epoch: %+v", res)
	}
	if res := hb("b", 1); res.Err != kerr.FencedMemberEpoch.Code {
		t.Fatalf("stale epoch: %+v", res)
	}
	// Four members on three partitions: every partition assigned, one
	// shared.
	hb("c", 0, "jobs")
	hb("d", 0, "jobs")
	seen := map[string]bool{}
	for _, m := range []string{"a", "b", "c", "d"} {
		res := hb(m, c.shareGroups["q"].Members[m].Epoch, "jobs")
		if len(res.Assignment) != 1 || len(res.Assignment[0].Partitions) != 1 {
			t.Fatalf("%s: %+v, want one partition each", m, res)
		}
		seen[parts(res)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("partitions assigned: %v, want all three", seen)
	}

	// What a restart loads back: the stored records, replayed into a
	// new core, hold the same epochs, members and subscriptions.
	stored := map[string]map[string][]byte{}
	for _, o := range c.Take().Ops {
		b := string(bucketNames[o.bucket])
		if stored[b] == nil {
			stored[b] = map[string][]byte{}
		}
		if o.value == nil {
			delete(stored[b], string(o.key))
		} else {
			stored[b][string(o.key)] = o.value
		}
	}
	reloaded := NewCore(Timeouts{}, 4, func() string { return "x" })
	if err := reloaded.load(func(bucket []byte, fn func(k, v []byte) error) error {
		for k, v := range stored[string(bucket)] {
			if err := fn([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	}, now); err != nil {
		t.Fatal(err)
	}
	rg, g := reloaded.shareGroups["q"], c.shareGroups["q"]
	if rg == nil || rg.Epoch != g.Epoch || len(rg.Members) != 4 || rg.Members["a"].Epoch != g.Members["a"].Epoch ||
		fmt.Sprint(rg.Members["c"].Topics) != "[jobs]" {
		t.Fatalf("reloaded share group %+v, want %+v", rg, g)
	}

	// Leaving: -1, the member is named for its records' release.
	if res := hb("d", -1); res.Epoch != -1 || res.Left == nil || res.Left.Member != "d" {
		t.Fatalf("leave: %+v", res)
	}
	// A session that times out fences the member.
	now = now.Add(46 * time.Second)
	hb("a", c.shareGroups["q"].Members["a"].Epoch)
	gone := c.ExpireShareMembers(now)
	if len(gone) != 2 || c.shareGroups["q"].Members["a"] == nil {
		t.Fatalf("expired %v, want b and c (a heartbeat just now)", gone)
	}
	if code := c.DeleteShareGroup("q"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %d", code)
	}

	// One id, one type: a share group refuses the classic and consumer
	// protocols and offset commits; a share heartbeat refuses a
	// consumer group's id.
	if res, _ := c.Join(now, JoinRequest{Group: "q", ProtocolType: "consumer", SessionTimeout: 10 * time.Second,
		RebalanceTimeout: 10 * time.Second, Protocols: []Protocol{{Name: "range"}}}, 1); res.Err != kerr.GroupIDNotFound.Code {
		t.Fatalf("JoinGroup on a share group: %+v", res)
	}
	if res := c.ConsumerHeartbeat(now, img, HeartbeatRequest{Version: 1, Group: "q", MemberID: "m", Topics: []string{"jobs"}, Owned: []OwnedTopic{}, RebalanceTimeoutMs: 1000}); res.Err != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupHeartbeat on a share group: %+v", res)
	}
	c.ConsumerHeartbeat(now, img, HeartbeatRequest{Version: 1, Group: "cg", MemberID: "m", Topics: []string{"jobs"}, Owned: []OwnedTopic{}, RebalanceTimeoutMs: 1000})
	if res := c.ShareHeartbeat(now, img, ShareHeartbeatRequest{Group: "cg", MemberID: "m", Topics: []string{"jobs"}}); res.Err != kerr.GroupIDNotFound.Code {
		t.Fatalf("ShareGroupHeartbeat on a consumer group: %+v", res)
	}
}
