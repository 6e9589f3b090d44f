package wire_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// The end of a connection calls the registry's OnDisconnect hooks with the
// id its requests carried (Request.ConnID), once; a connection that is
// still open is not reported.
func TestOnDisconnectNamesTheConnection(t *testing.T) {
	seen := make(chan uint64, 8)
	ended := make(chan uint64, 8)
	c := clustertest.Start(t, clustertest.Options{
		CoordinatorVersion: "4.2",
		Topics:             map[string]int32{"orders": 1},
		Register: func(_ cluster.Node, reg *wire.Registry) {
			reg.Register(27, 0, 2, func(_ context.Context, r *wire.Request) wire.Reply {
				seen <- r.ConnID
				return wire.Now(r.Body.(*kmsg.WriteTxnMarkersRequest).ResponseKind())
			})
			reg.OnDisconnect(func(id uint64) { ended <- id })
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func() (*wire.Client, uint64) {
		cl, err := wire.Dial(ctx, c.Coordinator().Addr, "disconnect-test")
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.SetVersion(1)
		if _, err := cl.Do(ctx, req); err != nil {
			t.Fatal(err)
		}
		return cl, <-seen
	}
	first, firstID := dial()
	second, secondID := dial()
	defer second.Close()
	if firstID == secondID {
		t.Fatalf("two connections carry the same id %d", firstID)
	}
	first.Close()
	select {
	case id := <-ended:
		if id != firstID {
			t.Fatalf("disconnect reported for %d, want the closed connection's %d", id, firstID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no disconnect reported for the closed connection")
	}
	select {
	case id := <-ended:
		t.Fatalf("disconnect reported for %d, whose connection is open", id)
	case <-time.After(200 * time.Millisecond):
	}
}
