package topics

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// RegisterForward over a real listener: a forwarded request reaches fwd at
// the client's version and its answer is relayed; synced runs after a
// change, never after a validate-only request; when the controller cannot
// be reached the answer is NOT_CONTROLLER for every topic.
func TestRegisterForward(t *testing.T) {
	// Atomics: fwd runs on the server's goroutines.
	var gotVersion, syncs atomic.Int32
	var fail atomic.Bool
	fwd := func(_ context.Context, req *wire.Request) (kmsg.Response, error) {
		if fail.Load() {
			return nil, errors.New("controller down")
		}
		gotVersion.Store(int32(req.Body.GetVersion()))
		r := req.Body.(*kmsg.CreateTopicsRequest)
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range r.Topics {
			out := kmsg.NewCreateTopicsResponseTopic()
			out.Topic, out.NumPartitions = rt.Topic, 7
			resp.Topics = append(resp.Topics, out)
		}
		return resp, nil
	}
	reg := wire.NewRegistry()
	RegisterForward(reg, fwd, func(context.Context) { syncs.Add(1) })
	srv, err := wire.Start(wire.Config{Addr: "127.0.0.1:0", Registry: reg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := wire.Dial(ctx, srv.Addr().String(), "forward-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	create := func(version int16, validateOnly bool) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 7, 1
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.CreateTopicsResponse)
	}
	if resp := create(5, false); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 7 || gotVersion.Load() != 5 || syncs.Load() != 1 {
		t.Fatalf("forwarded v5: %+v, version %d at the controller, %d syncs", resp.Topics, gotVersion.Load(), syncs.Load())
	}
	if resp := create(2, true); resp.Topics[0].ErrorCode != 0 || gotVersion.Load() != 2 || syncs.Load() != 1 {
		t.Fatalf("validate-only v2: %+v, version %d, %d syncs (want no sync)", resp.Topics, gotVersion.Load(), syncs.Load())
	}
	fail.Store(true)
	if resp := create(7, false); resp.Topics[0].ErrorCode != kerr.NotController.Code || syncs.Load() != 1 {
		t.Fatalf("controller down: %+v, %d syncs (want NOT_CONTROLLER, no sync)", resp.Topics, syncs.Load())
	}
}
