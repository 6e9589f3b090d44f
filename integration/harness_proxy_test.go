package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProxiedLeaderSurvivesRestarts: a leader behind a fault proxy gets
// its markers (and the clients' produce requests) through the proxy, also
// after RestartLeader and a whole-cluster Restart, which rebind the
// leader's real address behind the unchanged proxy address.
func TestProxiedLeaderSurvivesRestarts(t *testing.T) {
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.1"}, Topics: map[string]int32{"px": 2}, Proxied: []int32{1}})
	ctx := testCtx(t, 60*time.Second)
	p := partitionOn(t, c, "px", 2, 1)
	proxy := c.Proxy(1)
	if addr := c.File.Leaders[0].Addr; addr != proxy.Addr() {
		t.Fatalf("cluster file has %s for leader 1, want the proxy's %s", addr, proxy.Addr())
	}
	var want []string
	for i, restart := range []func(){func() {}, func() { c.RestartLeader(1, "4.2") }, c.Restart} {
		restart()
		before := proxy.Counts(int16(kmsg.WriteTxnMarkers)).Forwarded
		cl := c.txnProducer(t, fmt.Sprintf("px-app-%d", i))
		runTxn(ctx, t, cl, "px", []int32{p}, fmt.Sprintf("round%d", i), true)
		c.waitState(t, fmt.Sprintf("px-app-%d", i), "CompleteCommit")
		if got := proxy.Counts(int16(kmsg.WriteTxnMarkers)).Forwarded; got <= before {
			t.Fatalf("round %d: no marker went through the proxy (%d forwarded)", i, got)
		}
		if proxy.Counts(int16(kmsg.Produce)).Forwarded == 0 {
			t.Fatalf("round %d: the client's produce bypassed the proxy", i)
		}
		want = append(want, fmt.Sprintf("round%d-p%d", i, p))
	}
	if got := c.consumeUntil(ctx, t, "px", []int32{p}, true, want...); len(got) != len(want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
}
