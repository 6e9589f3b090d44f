package groups_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A group coordinator with nothing that can time out parks its ticker
// instead of waking every interval; a member that joins wakes it, and its
// session still times out on time; then the ticker parks again.
func TestTickerParksWhileNothingTimesOut(t *testing.T) {
	tc := startCluster(t)
	g := tc.e.Coordinator.Groups
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(within); !cond(); {
			if time.Now().After(end) {
				t.Fatalf("not within %v: %s", within, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("the ticker of an empty coordinator parks", 5*time.Second, g.Parked)

	const session = 400 * time.Millisecond
	g.SetConsumerTimeouts(session, 100*time.Millisecond)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = "parked", "m-1", 0
	req.RebalanceTimeoutMillis = 5000
	req.SubscribedTopicNames = []string{"in"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	joined := time.Now()
	resp := dialRaw(t, tc.addrs[0]).roundTrip(req, 1).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 || resp.MemberEpoch < 1 {
		t.Fatalf("join: code %d epoch %d", resp.ErrorCode, resp.MemberEpoch)
	}
	if g.Parked() {
		t.Fatal("the ticker is still parked after a member joined")
	}
	members := func() int {
		d, ok := g.DescribeGroup("parked")
		if !ok {
			return 0
		}
		return len(d.Members)
	}
	// The member never heartbeats again: its session runs out.
	waitFor("the silent member's session times out", 10*time.Second, func() bool { return members() == 0 })
	if took := time.Since(joined); took < session {
		t.Fatalf("member gone after %v, before its %v session", took, session)
	}
	waitFor("the ticker parks again with the group empty", 5*time.Second, g.Parked)
}
