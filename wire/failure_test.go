package wire_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// A handler that panics, a Reply that panics, and a handler that answers
// with the wrong response type each close only their own connection.
func TestHandlerBugsCloseOnlyThatConnection(t *testing.T) {
	var logs logBuffer
	c := startInitPID(t, logs.logger(), buggyInitPID)
	addr := c.Coordinator().Addr
	initPID := func(txnID string) *kmsg.InitProducerIDRequest {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.TransactionalID = kmsg.StringPtr(txnID)
		return req
	}
	bystander := dialRaw(t, addr)
	bystander.roundTrip(initPID("ok"), 1)

	for i, txnID := range []string{"panic", "reply-panic", "wrong-type", "nil-reply"} {
		t.Run(txnID, func(t *testing.T) {
			conn := dialRaw(t, addr)
			conn.write(frameOf(initPID(txnID), 1))
			conn.expectClosed()
			line := logs.waitLog(t, map[string]any{"remote": conn.local(), "level": "error"})
			if line["api_key"] != float64(22) {
				t.Fatalf("log line %v lacks api_key 22", line)
			}
			checkAlive(t, addr)
			bystander.roundTrip(initPID("ok"), int32(i+2))
		})
	}
}

// MaxConns refuses connections past the cap; a slot frees when a
// connection ends.
func TestMaxConns(t *testing.T) {
	var logs logBuffer
	c := clustertest.Start(t, clustertest.Options{
		Log:  logs.logger(),
		Tune: func(_ cluster.Node, cfg *wire.Config) { cfg.MaxConns = 2 },
	})
	addr := c.Coordinator().Addr
	first, second := dialRaw(t, addr), dialRaw(t, addr)
	first.roundTrip(apiVersionsReq(3), 1) // both are being served
	second.roundTrip(apiVersionsReq(3), 1)

	third := dialRaw(t, addr)
	third.expectClosed()
	logs.waitLog(t, map[string]any{"message": "connection refused: too many connections"})

	first.nc.Close()
	// The server notices the close on its own goroutine; poll for the
	// freed slot.
	for attempt := 0; ; attempt++ {
		conn := dialRaw(t, addr)
		conn.write(frameOf(apiVersionsReq(3), 1))
		if _, err := conn.readFrame(); err == nil {
			break
		}
		if attempt == 1000 {
			t.Fatal("no connection accepted after one of two ended")
		}
	}
	second.roundTrip(apiVersionsReq(3), 2)
}
