package coordclient

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDialNegotiates: requests go at min(kmsg max, the
// coordinator's advertised max); after the coordinator restarts with a
// different range the client reconnects and renegotiates; a coordinator
// without AddPartitionsToTxn v4+ is refused.
func TestDialNegotiates(t *testing.T) {
	fc := startVersionFake(t, nil, 3, 3)
	addr := fc.srv.Addr().String()
	dc := Dial(addr, zerolog.Nop())
	defer dc.Close()
	ctx := context.Background()
	if _, err := dc.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest()); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.AddPartitionsToTxn(ctx, kmsg.NewPtrAddPartitionsToTxnRequest()); !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("AddPartitionsToTxn to a coordinator with max v3: %v, want UNSUPPORTED_VERSION", err)
	}
	shutdown(fc.srv)
	var ln2 net.Listener
	waitFor(t, "the coordinator port to be free again", func() bool {
		var err error
		ln2, err = net.Listen("tcp", addr)
		return err == nil
	})
	fc2 := startVersionFake(t, ln2, 5, 5)
	waitFor(t, "a reconnect", func() bool {
		_, err := dc.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
		return err == nil
	})
	if _, err := dc.AddPartitionsToTxn(ctx, kmsg.NewPtrAddPartitionsToTxnRequest()); err != nil {
		t.Fatal(err)
	}
	if v := fc.versionsOf(22); len(v) != 1 || v[0] != 3 {
		t.Fatalf("first coordinator saw InitProducerId versions %v, want [3]", v)
	}
	if v := fc2.versionsOf(22); len(v) != 1 || v[0] != 5 {
		t.Fatalf("second coordinator saw InitProducerId versions %v, want [5]", v)
	}
	if v := fc2.versionsOf(24); len(v) != 1 || v[0] != 5 {
		t.Fatalf("AddPartitionsToTxn versions %v, want [5]", v)
	}
}
