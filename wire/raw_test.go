package wire_test

import (
	"context"
	"encoding/binary"
	"math/rand"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// frameTimeout is short so that the stalled-frame case is quick.
const frameTimeout = 200 * time.Millisecond

// startRawNode starts a one-node cluster for raw-socket tests: a Kafka 4.1
// coordinator that also registers WriteTxnMarkers 0–2, so the 4.1 profile
// caps it at v1 (as a 4.1 leader advertises), with the default 100 MiB
// frame limit and a short frame timeout.
func startRawNode(t *testing.T, logs *logBuffer) clustertest.Node {
	t.Helper()
	c := clustertest.Start(t, clustertest.Options{
		CoordinatorVersion: "4.1",
		Topics:             map[string]int32{"orders": 3},
		Log:                logs.logger(),
		Register: func(_ cluster.Node, reg *wire.Registry) {
			reg.Register(27, 0, 2, func(_ context.Context, r *wire.Request) wire.Reply {
				return wire.Now(r.Body.(*kmsg.WriteTxnMarkersRequest).ResponseKind())
			})
		},
		Tune: func(_ cluster.Node, cfg *wire.Config) { cfg.FrameTimeout = frameTimeout },
	})
	return c.Coordinator()
}

// A newer client's ApiVersions (v9) gets the KIP-511 answer: a v0 response
// with UNSUPPORTED_VERSION and the ApiVersions key with our max, on a
// connection that stays open for the retry.
func TestKIP511Downgrade(t *testing.T) {
	var logs logBuffer
	node := startRawNode(t, &logs)
	c := dialRaw(t, node.Addr)
	probe := frameOf(apiVersionsReq(4), 7)
	binary.BigEndian.PutUint16(probe[6:], 9) // the version field
	c.write(probe)
	frame, err := c.readFrame()
	if err != nil {
		t.Fatalf("no KIP-511 answer: %v", err)
	}
	resp := decodeResponse(t, frame, apiVersionsReq(0), 7).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 35 {
		t.Fatalf("error code %d, want 35 (UNSUPPORTED_VERSION)", resp.ErrorCode)
	}
	if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 4 {
		t.Fatalf("ApiKeys %+v, want only key 18 v0–4", resp.ApiKeys)
	}
	// The client retries at v4 on the same connection.
	again := c.roundTrip(apiVersionsReq(4), 8).(*kmsg.ApiVersionsResponse)
	if again.ErrorCode != 0 || len(again.ApiKeys) < 3 {
		t.Fatalf("retry at v4: error %d, %d keys", again.ErrorCode, len(again.ApiKeys))
	}
}

// Every kind of bad input closes that connection, with a log line naming
// the remote address and the reason; a new connection works afterwards,
// and so does a connection that was open all along.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	var logs logBuffer
	node := startRawNode(t, &logs)
	bystander := dialRaw(t, node.Addr)
	bystander.roundTrip(apiVersionsReq(3), 1)

	sized := func(size uint32, rest ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, size), rest...)
	}
	withVersion := func(req kmsg.Request, v int16) []byte {
		req.SetVersion(v)
		return frameOf(req, 1)
	}
	rng := rand.New(rand.NewSource(1))
	garbage := make([]byte, 1024)
	rng.Read(garbage)
	framedGarbage := make([]byte, 40)
	rng.Read(framedGarbage)
	framedGarbage[0], framedGarbage[1] = 0x7f, 0x00 // api key 32512
	truncatedBody := withVersion(kmsg.NewPtrMetadataRequest(), 12)
	truncatedBody = truncatedBody[:len(truncatedBody)-3]
	binary.BigEndian.PutUint32(truncatedBody, uint32(len(truncatedBody)-4))
	// ApiVersions v3 (flexible) whose header tag section claims one tag
	// with a 100-byte value that is not there.
	badTags := binary.BigEndian.AppendUint32(nil, 0)
	badTags = append(badTags, 0, 18, 0, 3, 0, 0, 0, 1) // key, version, corr
	badTags = append(badTags, 0xff, 0xff)              // null client id
	badTags = append(badTags, 1, 0, 100, 0, 0)         // 1 tag: id 0, 100 bytes
	binary.BigEndian.PutUint32(badTags, uint32(len(badTags)-4))

	unknownKey := frameOf(apiVersionsReq(0), 1)
	binary.BigEndian.PutUint16(unknownKey[4:], 1000)

	cases := []struct {
		name   string
		bytes  []byte
		reason string // the log line's reason ("" when any reason is right)
	}{
		{"frame claiming 2 GiB", sized(0x7fffffff, 0, 18, 0, 3), "bad frame size"},
		{"frame over the 100 MiB limit", sized(wire.DefaultMaxFrameBytes+1, 0, 18, 0, 3), "bad frame size"},
		{"negative frame size", sized(0xffffff00, 0, 18), "bad frame size"},
		{"frame smaller than a header", sized(3, 0, 18, 0), "bad frame size"},
		{"truncated frame, then stall", sized(100, 0, 18, 0, 3, 0, 0), "read timeout"},
		{"random garbage", garbage, ""},
		{"garbage in a well-sized frame", sized(uint32(len(framedGarbage)), framedGarbage...), ""},
		{"unknown api key", unknownKey, "unsupported api key"},
		{"WriteTxnMarkers v2 on a 4.1 node", withVersion(kmsg.NewPtrWriteTxnMarkersRequest(), 2), "unsupported version"},
		{"undecodable body", truncatedBody, "undecodable request"},
		{"bad header tag section", badTags, "bad request header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, node.Addr)
			c.write(tc.bytes)
			c.expectClosed()
			want := map[string]any{"remote": c.local()}
			if tc.reason != "" {
				want["reason"] = tc.reason
			}
			line := logs.waitLog(t, want)
			if line["level"] != "warn" {
				t.Fatalf("log line %v, want level warn", line)
			}
			checkAlive(t, node.Addr)
		})
	}
	// The bystander's connection was never disturbed.
	if resp := bystander.roundTrip(apiVersionsReq(3), 2).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("bystander: error %d", resp.ErrorCode)
	}
}

// A frame's claimed size is checked before anything of that size is
// allocated, and a claim under the limit costs memory only as bytes
// arrive: neither a 2 GiB claim nor a 100 MiB claim with a few bytes
// behind it makes the process allocate anything like that.
func TestFrameClaimsDoNotAllocate(t *testing.T) {
	var logs logBuffer
	node := startRawNode(t, &logs)
	checkAlive(t, node.Addr) // warm up: first connection's buffers

	claims := []struct {
		name string
		size uint32
	}{
		{"2 GiB", 0x7fffffff},
		{"just under the 100 MiB limit", wire.DefaultMaxFrameBytes - 1},
	}
	for _, cl := range claims {
		t.Run(cl.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c := dialRaw(t, node.Addr)
			frame := binary.BigEndian.AppendUint32(nil, cl.size)
			frame = append(frame, frameOf(apiVersionsReq(3), 1)[4:]...)
			c.write(frame)
			c.expectClosed() // refused, or dropped after the frame timeout
			runtime.ReadMemStats(&after)
			// TotalAlloc counts every allocation, freed or not.
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d KiB while handling a %d-byte claim", grew>>10, cl.size)
			if grew > 16<<20 {
				t.Fatalf("allocated %d MiB for a frame claiming %d bytes", grew>>20, cl.size)
			}
			checkAlive(t, node.Addr)
		})
	}
}
