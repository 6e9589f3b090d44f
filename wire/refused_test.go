package wire_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// Produce v0–v2 are advertised (Produce registered from v0) but refused
// as Kafka 4.x refuses them (KAFKA-18659): the connection is closed at the
// request's header, after the answers to earlier requests, without an
// answer, with one info line naming the client and the version; the
// handler never sees the request, nor anything pipelined after it. v3 is
// served. An in-process caller at v2 gets ErrUnsupportedVersion.
func TestProduceV0ToV2AdvertisedButRefused(t *testing.T) {
	var logs logBuffer
	var calls atomic.Int32
	c := clustertest.Start(t, clustertest.Options{
		Log: logs.logger(),
		Register: func(_ cluster.Node, reg *wire.Registry) {
			reg.Register(0, 0, 13, func(_ context.Context, r *wire.Request) wire.Reply {
				calls.Add(1)
				return wire.Now(r.Body.(*kmsg.ProduceRequest).ResponseKind())
			})
		},
	})
	node := c.Coordinator()

	conn := dialRaw(t, node.Addr)
	av := conn.roundTrip(apiVersionsReq(3), 1).(*kmsg.ApiVersionsResponse)
	var advertised bool
	for _, k := range av.ApiKeys {
		if k.ApiKey == 0 {
			advertised = k.MinVersion == 0 && k.MaxVersion == 13
		}
	}
	if !advertised {
		t.Fatalf("Produce not advertised as v0–v13: %+v", av.ApiKeys)
	}

	for v := int16(0); v <= 2; v++ {
		c := dialRaw(t, node.Addr)
		produce := kmsg.NewPtrProduceRequest()
		produce.SetVersion(v)
		produce.Acks = 1
		// ApiVersions, Produce vN and Metadata in one write: the first is
		// answered, then the connection closes.
		frames := frameOf(apiVersionsReq(3), 1)
		frames = append(frames, frameOf(produce, 2)...)
		frames = append(frames, frameOf(kmsg.NewPtrMetadataRequest(), 3)...)
		c.write(frames)
		frame, err := c.readFrame()
		if err != nil {
			t.Fatalf("Produce v%d: the ApiVersions before it was not answered: %v", v, err)
		}
		decodeResponse(t, frame, apiVersionsReq(3), 1)
		c.expectClosed()
		lines := logs.lines(map[string]any{"level": "info", "api_key": float64(0), "api_version": float64(v),
			"client_id": "raw-test", "message": "connection closed: advertised but refused request version, as Kafka 4.x does"})
		if len(lines) != 1 || lines[0]["remote"] != c.local() {
			t.Fatalf("Produce v%d: refusal lines %v, want one naming the client and its address", v, lines)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the Produce handler ran %d times for refused versions", n)
	}

	v3 := kmsg.NewPtrProduceRequest()
	v3.SetVersion(3)
	v3.Acks = 1
	conn.roundTrip(v3, 2)
	if n := calls.Load(); n != 1 {
		t.Fatalf("Produce v3: handler ran %d times, want 1", n)
	}

	local := node.Server.Local("").AtCallerVersion()
	v2 := kmsg.NewPtrProduceRequest()
	v2.SetVersion(2)
	v2.Acks = 1
	if _, err := local.Do(context.Background(), v2); !errors.Is(err, wire.ErrUnsupportedVersion) {
		t.Fatalf("in-process Produce v2: %v, want ErrUnsupportedVersion", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("in-process Produce v2 reached the handler")
	}
}
