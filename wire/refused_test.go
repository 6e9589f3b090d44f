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

	// librdkafka is shown Produce from v0, as Kafka 4.x shows every
	// client; any other client the versions the node accepts, v3–v13.
	produceRange := func(software string) [2]int16 {
		req := apiVersionsReq(3)
		req.ClientSoftwareName = software
		av := dialRaw(t, node.Addr).roundTrip(req, 1).(*kmsg.ApiVersionsResponse)
		for _, k := range av.ApiKeys {
			if k.ApiKey == 0 {
				return [2]int16{k.MinVersion, k.MaxVersion}
			}
		}
		t.Fatalf("%s: Produce not advertised: %+v", software, av.ApiKeys)
		return [2]int16{}
	}
	if r := produceRange("librdkafka"); r != [2]int16{0, 13} {
		t.Fatalf("librdkafka is shown Produce v%d–v%d, want v0–v13", r[0], r[1])
	}
	for _, software := range []string{"kgo", "raw-test", ""} {
		if r := produceRange(software); r != [2]int16{3, 13} {
			t.Fatalf("%q is shown Produce v%d–v%d, want v3–v13", software, r[0], r[1])
		}
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
	dialRaw(t, node.Addr).roundTrip(v3, 2)
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
