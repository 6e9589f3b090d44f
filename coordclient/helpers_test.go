package coordclient

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

func shutdown(srv *wire.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
}

// codeName is a Kafka error code for test output: NONE, or kerr's text.
func codeName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "NONE"
}

// acceptAll answers every partition of req NONE, as a coordinator that
// registers everything does.
func acceptAll(req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Transactions {
		resp.Transactions = append(resp.Transactions, failedTransaction(t, 0))
	}
	return resp
}

// versionFake is a coordinator server on real Kafka wire answering
// InitProducerId (up to initMax) and AddPartitionsToTxn (up to addMax,
// UNSUPPORTED_VERSION below v4, else every partition NONE); it records the
// version of every request it received.
type versionFake struct {
	srv      *wire.Server
	mu       sync.Mutex
	versions map[int16][]int16
	nextPID  int64
}

// startVersionFake serves on ln, or on a port of its own when ln is nil.
func startVersionFake(t *testing.T, ln net.Listener, initMax, addMax int16) *versionFake {
	fc := &versionFake{versions: map[int16][]int16{}}
	reg := wire.NewRegistry()
	reg.Register(22, 0, initMax, func(_ context.Context, r *wire.Request) wire.Reply {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		fc.versions[22] = append(fc.versions[22], r.Version)
		resp := r.Body.ResponseKind().(*kmsg.InitProducerIDResponse)
		fc.nextPID++
		resp.ProducerID = fc.nextPID
		return wire.Now(resp)
	})
	reg.Register(24, 0, addMax, func(_ context.Context, r *wire.Request) wire.Reply {
		fc.mu.Lock()
		fc.versions[24] = append(fc.versions[24], r.Version)
		fc.mu.Unlock()
		req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
		if r.Version < addPartitionsBrokerVersion {
			resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return wire.Now(resp)
		}
		return wire.Now(acceptAll(req))
	})
	srv, err := wire.Start(wire.Config{Addr: "127.0.0.1:0", Listener: ln, Registry: reg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	fc.srv = srv
	t.Cleanup(func() { shutdown(srv) })
	return fc
}

func (fc *versionFake) versionsOf(key int16) []int16 {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]int16(nil), fc.versions[key]...)
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
