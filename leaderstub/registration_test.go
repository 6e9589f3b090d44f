package leaderstub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/wire"
)

// A coordinator that cannot answer now (unreachable, moving, busy) is the
// retriable NOT_ENOUGH_REPLICAS to the producer.
func TestVerifyErrorRetriable(t *testing.T) {
	for _, code := range []int16{kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.ConcurrentTransactions.Code, kerr.RequestTimedOut.Code} {
		if got := verifyError(code, 12); got != kerr.NotEnoughReplicas.Code {
			t.Fatalf("%s maps to %s, want the retriable NOT_ENOUGH_REPLICAS", codeName(code), codeName(got))
		}
	}
}

// An in-process registration (perTxn: sent on the Produce handler's
// goroutine) is bounded by the Produce request's context: a coordinator
// whose answer waits for its caller to give up (the CONCURRENT_TRANSACTIONS
// wait watches wire.CallerDone) lets the handler return once that context
// ends (the server's Shutdown deadline), not after the registrar's own
// 15 s request bound, and the batch is refused, not appended.
func TestInProcessRegistrationEndsWithRequest(t *testing.T) {
	entered := make(chan struct{}, 16)
	coord := coordclient.InProcess(func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		switch req.(type) {
		case *kmsg.ApiVersionsRequest:
			resp := kmsg.NewPtrApiVersionsResponse()
			for _, key := range []int16{22, 24} {
				k := kmsg.NewApiVersionsResponseApiKey()
				k.ApiKey, k.MinVersion, k.MaxVersion = key, 0, 5
				resp.ApiKeys = append(resp.ApiKeys, k)
			}
			return resp, nil
		case *kmsg.AddPartitionsToTxnRequest:
			entered <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("unexpected %T", req)
	})
	f := newFixtureWith(t, func(c *Config) { c.Coordinator = coord })
	ctx, cancel := context.WithCancel(context.Background())
	txnID := "waiting"
	req := produceReq("t", 0, &txnID, -1, testBatch{pid: 1, epoch: 0, seq: 0, txn: true, payload: "p"}.bytes())
	req.SetVersion(12)
	done := make(chan kmsg.Response, 1)
	go func() {
		reply := f.l.handleProduce(ctx, &wire.Request{Body: req, Key: 0, Version: 12, Log: zerolog.Nop()})
		resp, _ := reply()
		done <- resp
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the registration never reached the coordinator")
	}
	cancel()
	select {
	case resp := <-done:
		if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code == 0 {
			t.Fatal("a batch whose registration never got an answer was appended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Produce handler outlived its request's context by 5 s: the registration is not bounded by it")
	}
}
