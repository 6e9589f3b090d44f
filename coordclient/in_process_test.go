package coordclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

func registrationReq(txnID string) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = txnID, 1, 0
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "t", []int32{0}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	return req
}

// InProcess over a coordinator's in-process client sends
// AddPartitionsToTxn at the coordinator's max (v5) and forwards
// InitProducerId; a coordinator that stops at v3 gets no AddPartitionsToTxn
// at all (UNSUPPORTED_VERSION before sending), as with the dialed client.
func TestCoordinatorFuncVersions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, addMax := range []int16{5, 3} {
		fc := startVersionFake(t, nil, 5, addMax)
		coord := InProcess(fc.srv.Local("").Do)

		resp, err := coord.AddPartitionsToTxn(ctx, registrationReq("a"))
		if addMax < 4 {
			if !errors.Is(err, kerr.UnsupportedVersion) {
				t.Fatalf("coordinator with AddPartitionsToTxn max v%d: %v, want UNSUPPORTED_VERSION", addMax, err)
			}
			if got := fc.versionsOf(24); len(got) != 0 {
				t.Fatalf("coordinator with max v%d received AddPartitionsToTxn %v", addMax, got)
			}
		} else {
			if err != nil {
				t.Fatal(err)
			}
			if got := fc.versionsOf(24); len(got) != 1 || got[0] != 5 {
				t.Fatalf("AddPartitionsToTxn versions %v, want [5]", got)
			}
			if len(resp.Transactions) != 1 || resp.Transactions[0].TransactionalID != "a" {
				t.Fatalf("AddPartitionsToTxn answer %+v", resp)
			}
		}
		pid, err := coord.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
		if err != nil || pid.ErrorCode != 0 {
			t.Fatalf("InitProducerId: %v, %+v", err, pid)
		}
		if got := fc.versionsOf(22); len(got) != 1 || got[0] != 5 {
			t.Fatalf("InitProducerId versions %v, want [5]", got)
		}
	}
}

// Errors from the function reach the caller (the registrar answers
// NOT_ENOUGH_REPLICAS), and the versions are learnt again afterwards, as a
// dialed client renegotiates on reconnect.
func TestCoordinatorFuncErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fc := startVersionFake(t, nil, 5, 5)
	local := fc.srv.Local("")
	var down atomic.Bool
	var apiVersions atomic.Int32
	down.Store(true)
	errDown := errors.New("coordinator down")
	coord := InProcess(func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		if req.Key() == 18 {
			apiVersions.Add(1)
		}
		if down.Load() {
			return nil, errDown
		}
		return local.Do(ctx, req)
	})
	if _, err := coord.AddPartitionsToTxn(ctx, registrationReq("a")); !errors.Is(err, errDown) {
		t.Fatalf("coordinator down: %v", err)
	}
	down.Store(false)
	for range 2 {
		if _, err := coord.AddPartitionsToTxn(ctx, registrationReq("a")); err != nil {
			t.Fatal(err)
		}
	}
	if n := apiVersions.Load(); n != 2 {
		t.Fatalf("%d ApiVersions, want 2 (one failed, one learnt and kept)", n)
	}
	// An error after the versions were learnt makes the next call ask again.
	down.Store(true)
	if _, err := coord.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest()); !errors.Is(err, errDown) {
		t.Fatalf("coordinator down: %v", err)
	}
	down.Store(false)
	if _, err := coord.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest()); err != nil {
		t.Fatal(err)
	}
	if n := apiVersions.Load(); n != 3 {
		t.Fatalf("%d ApiVersions, want 3", n)
	}

	// Through a Registrar the error is the retriable
	// NOT_ENOUGH_REPLICAS, as for an unreachable coordinator over TCP.
	down.Store(true)
	r := NewRegistrar(coord, 1, zerolog.Nop())
	defer r.Close()
	reg := &Registration{TxnID: "a", PID: 1, Topic: "t", Partition: 0}
	r.Register(ctx, []*Registration{reg})
	if reg.Code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("registration with the coordinator down: code %d, want NOT_ENOUGH_REPLICAS", reg.Code)
	}
}

// BenchmarkCoordinatorRoundTrip is one AddPartitionsToTxn registration
// (one transaction, one partition) to a coordinator node that accepts
// every partition: over TCP (Dial) and in-process (InProcess over the
// server's LocalClient), same handlers.
func BenchmarkCoordinatorRoundTrip(b *testing.B) {
	reg := wire.NewRegistry()
	reg.Register(24, 0, 5, func(_ context.Context, r *wire.Request) wire.Reply {
		return wire.Now(acceptAll(r.Body.(*kmsg.AddPartitionsToTxnRequest)))
	})
	srv, err := wire.Start(wire.Config{Addr: "127.0.0.1:0", Registry: reg, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer shutdown(srv)
	for _, c := range []struct {
		name  string
		coord Client
	}{
		{"tcp", Dial(srv.Addr().String(), zerolog.Nop())},
		{"in-process", InProcess(srv.Local("").Do)},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					if _, err := c.coord.AddPartitionsToTxn(ctx, registrationReq("a")); err != nil {
						b.Error(err)
					}
					cancel()
				}
			})
		})
		c.coord.Close()
	}
}

// With an in-process coordinator each transaction is registered in a request
// of its own: one transaction held by the coordinator (waiting for its
// previous transaction's markers) does not hold up another queued with it.
func TestRegistrarPerTransactionInProcess(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	requests := 0
	coord := InProcess(func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		switch req := req.(type) {
		case *kmsg.ApiVersionsRequest:
			resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MaxVersion = 24, 5
			resp.ApiKeys = append(resp.ApiKeys, k)
			return resp, nil
		case *kmsg.AddPartitionsToTxnRequest:
			req.SetVersion(5) // as wire.LocalClient: min(kmsg, advertised)
			mu.Lock()
			requests++
			mu.Unlock()
			if len(req.Transactions) != 1 {
				t.Errorf("%d transactions in one in-process request, want 1", len(req.Transactions))
			}
			if req.Transactions[0].TransactionalID == "slow" {
				<-release
			}
			return acceptAll(req), nil
		}
		return nil, fmt.Errorf("unexpected %T", req)
	})
	r := NewRegistrar(coord, 1, zerolog.Nop())
	defer r.Close()
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) }) // before close, if the test fails early
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		r.Register(ctx, []*Registration{{TxnID: "slow", PID: 1, Topic: "t", Partition: 0}})
	}()
	fast := []*Registration{{TxnID: "fast", PID: 2, Topic: "t", Partition: 0}, {TxnID: "fast", PID: 2, Topic: "t", Partition: 1}}
	r.Register(ctx, fast)
	for _, reg := range fast {
		if reg.Code != 0 {
			t.Fatalf("fast registration: code %d", reg.Code)
		}
	}
	select {
	case <-slowDone:
		t.Fatal("the slow transaction finished before it was released")
	default:
	}
	releaseOnce.Do(func() { close(release) })
	<-slowDone
	mu.Lock()
	defer mu.Unlock()
	if requests != 2 {
		t.Fatalf("%d requests for two transactions, want 2", requests)
	}
}
