package wire_test

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

func dialClient(t *testing.T, addr string) *wire.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	cl, err := wire.Dial(ctx, addr, "client-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// wire.Client sends requests at the version set on them and decodes the
// answers, flexible (header v1) and not.
func TestClientRoundTrip(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Topics: map[string]int32{"orders": 2}})
	cl := dialClient(t, c.Coordinator().Addr)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for _, v := range []int16{4, 9, 13} {
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(v)
		raw, err := cl.Do(ctx, md)
		if err != nil {
			t.Fatalf("Metadata v%d: %v", v, err)
		}
		resp := raw.(*kmsg.MetadataResponse)
		// The topic and the internal __consumer_offsets.
		if len(resp.Brokers) != 2 || len(resp.Topics) != 2 || len(dataTopic(resp).Partitions) != 2 {
			t.Fatalf("Metadata v%d: %+v", v, resp)
		}
	}
}

// Client.ApiVersions opens at kmsg's newest version (v5); a Kafka 4.2 node
// answers per KIP-511 and the client retries at v4.
func TestClientApiVersionsKIP511(t *testing.T) {
	var logs logBuffer
	c := clustertest.Start(t, clustertest.Options{Log: logs.logger()})
	cl := dialClient(t, c.Coordinator().Addr)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	resp, err := cl.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// transaction.version and share.version, both finalized on a 4.2
	// cluster.
	if resp.GetVersion() != 4 || resp.ErrorCode != 0 || len(resp.FinalizedFeatures) != 2 ||
		resp.FinalizedFeatures[0].Name != "transaction.version" || resp.FinalizedFeatures[1].Name != "share.version" {
		t.Fatalf("ApiVersions: v%d error %d features %+v", resp.GetVersion(), resp.ErrorCode, resp.FinalizedFeatures)
	}
	logs.waitLog(t, map[string]any{"message": "ApiVersions above our max: KIP-511 answer", "api_version": float64(5)})

	// A node without a profile speaks v5: no retry.
	open := clustertest.Start(t, clustertest.Options{Tune: func(_ cluster.Node, cfg *wire.Config) { cfg.Profile = nil }})
	resp, err = dialClient(t, open.Coordinator().Addr).ApiVersions(ctx)
	if err != nil || resp.GetVersion() != 5 {
		t.Fatalf("ApiVersions without profile: %v, %+v", err, resp)
	}
}

// Cancelling the context interrupts a read blocked on a slow reply; the
// connection is then unusable.
func TestClientContextCancel(t *testing.T) {
	slow := newSlowHandler()
	c := clustertest.Start(t, clustertest.Options{Register: slow.register})
	t.Cleanup(func() { close(slow.release) }) // before Shutdown (LIFO)
	cl := dialClient(t, c.Coordinator().Addr)

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-slow.entered
		cancel()
	}()
	_, err := cl.Do(ctx, initPIDReq())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	if _, err := cl.Do(context.Background(), initPIDReq()); !errors.Is(err, wire.ErrClientBroken) {
		t.Fatalf("Do after cancel = %v, want ErrClientBroken", err)
	}
}

// dataTopic is the one topic of a Metadata answer that is not internal.
func dataTopic(resp *kmsg.MetadataResponse) kmsg.MetadataResponseTopic {
	for _, t := range resp.Topics {
		if !t.IsInternal {
			return t
		}
	}
	return kmsg.MetadataResponseTopic{}
}
