package wire_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
)

// kgoLog records kgo's own log lines, to see what it did on the wire.
type kgoLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *kgoLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }
func (l *kgoLog) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(append([]any{msg}, keyvals...)...))
}

func (l *kgoLog) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// A real kgo client, capped to send each ApiVersions version v0–v5 in turn,
// gets the registered ranges clamped by the 4.2 profile and, from v3, the
// transaction.version feature finalized at 2 with an epoch kgo accepts.
func TestApiVersionsKgoEveryVersion(t *testing.T) {
	var logs logBuffer
	c := clustertest.Start(t, clustertest.Options{Log: logs.logger()})
	coord := c.Coordinator()

	// What the server must advertise: Metadata (registered 4–13) and
	// FindCoordinator (0–6) capped by Kafka 4.2, and the built-in
	// ApiVersions 0–4 (kmsg knows v5, Kafka 4.2 stops at v4).
	profile := kversion.V4_2_0()
	capped := func(key, maxVersion int16) int16 {
		p, _ := profile.LookupMaxKeyVersion(key)
		return min(p, maxVersion)
	}
	want := map[int16][2]int16{
		3:  {cluster.MetadataMinVersion, capped(3, 13)},
		10: {0, capped(10, 6)},
		18: {0, 4},
	}

	for v := int16(0); v <= 5; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			caps := kversion.Stable()
			caps.SetMaxKeyVersion(18, v)
			var klog kgoLog
			cl, err := kgo.NewClient(kgo.SeedBrokers(coord.Addr), kgo.MaxVersions(caps), kgo.WithLogger(&klog))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			raw, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest())
			if err != nil {
				t.Fatalf("ApiVersions: %v", err)
			}
			resp := raw.(*kmsg.ApiVersionsResponse)
			// kgo sends min(its cap, the broker's max from the
			// connection's own ApiVersions): v5 is capped to v4.
			if got, wantV := resp.GetVersion(), min(v, 4); got != wantV {
				t.Fatalf("response version %d, want %d", got, wantV)
			}
			if resp.ErrorCode != 0 {
				t.Fatalf("error code %d", resp.ErrorCode)
			}
			got := map[int16][2]int16{}
			for _, k := range resp.ApiKeys {
				got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("ApiKeys %v, want %v", got, want)
			}
			for key, r := range want {
				if lo, hi, ok := coord.Server.Advertised(key); !ok || lo != r[0] || hi != r[1] {
					t.Fatalf("Server.Advertised(%d) = %d,%d,%v; want %v", key, lo, hi, ok, r)
				}
			}
			if v == 5 && !klog.contains("downgrading to version 4 and retrying") {
				// With a full key list in the KIP-511 answer kgo
				// keeps the v0 answer instead of retrying.
				t.Fatal("kgo did not retry its connection's ApiVersions at v4")
			}
			if v < 3 {
				return // no feature fields before v3
			}
			if len(resp.SupportedFeatures) != 2 || resp.SupportedFeatures[0].Name != "transaction.version" ||
				resp.SupportedFeatures[0].MinVersion != 0 || resp.SupportedFeatures[0].MaxVersion != 2 ||
				resp.SupportedFeatures[1].Name != "share.version" || resp.SupportedFeatures[1].MaxVersion != 1 {
				t.Fatalf("SupportedFeatures %+v, want transaction.version 0–2, share.version 0–1", resp.SupportedFeatures)
			}
			if len(resp.FinalizedFeatures) != 2 || resp.FinalizedFeatures[0].Name != "transaction.version" ||
				resp.FinalizedFeatures[0].MaxVersionLevel != 2 ||
				resp.FinalizedFeatures[1].Name != "share.version" || resp.FinalizedFeatures[1].MaxVersionLevel != 1 {
				t.Fatalf("FinalizedFeatures %+v, want transaction.version 2, share.version 1", resp.FinalizedFeatures)
			}
			// kmsg writes this tagged field only when it is not -1;
			// kgo ignores the features without it.
			if resp.FinalizedFeaturesEpoch < 0 {
				t.Fatalf("FinalizedFeaturesEpoch %d, want >= 0", resp.FinalizedFeaturesEpoch)
			}
		})
	}

	// What happened at v5, on the wire: kgo opened its connection with
	// ApiVersions v5, above the 4.2 max of v4. The server answered per
	// KIP-511 (v0, error 35, only key 18 with max 4), and kgo retried the
	// connection's ApiVersions at v4. Had the server listed every key in
	// that answer, kgo would have kept the feature-less v0 answer and
	// never enabled transaction.version 2.
	if len(logs.lines(map[string]any{"message": "ApiVersions above our max: KIP-511 answer", "api_version": float64(5)})) == 0 {
		t.Fatal("server never saw the v5 ApiVersions probe")
	}
}

// ApiVersions v5 (KIP-1242) on a Kafka 4.4 node: a client may name the
// cluster and node it believes it reached. Naming this node passes, another
// cluster or node is REBOOTSTRAP_REQUIRED, one without the other is
// INVALID_REQUEST, both errors with no keys. A real kgo client, which names
// them on every connection to a broker it learnt from Metadata, gets its
// answers there: the identity Metadata hands out is the one ApiVersions
// checks.
func TestApiVersionsV5Identity(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{CoordinatorVersion: "4.4", LeaderVersions: []string{"4.4"}})
	leader := c.Nodes[1]
	cl, err := kgo.NewClient(kgo.SeedBrokers(leader.Server.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	clusterID := leader.View.ClusterID()
	other := "another-cluster"
	for _, tc := range []struct {
		name      string
		clusterID *string
		nodeID    int32
		code      int16
	}{
		{"neither", nil, -1, 0},
		{"this node", &clusterID, leader.Node.NodeID, 0},
		{"another node", &clusterID, leader.Node.NodeID + 7, kerr.RebootstrapRequired.Code},
		{"another cluster", &other, leader.Node.NodeID, kerr.RebootstrapRequired.Code},
		{"cluster alone", &clusterID, -1, kerr.InvalidRequest.Code},
		{"node alone", nil, leader.Node.NodeID, kerr.InvalidRequest.Code},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "txncoord-test", "1"
		req.ClusterID, req.NodeID = tc.clusterID, tc.nodeID
		raw, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp := raw.(*kmsg.ApiVersionsResponse)
		if resp.GetVersion() != 5 || resp.ErrorCode != tc.code {
			t.Fatalf("%s: v%d error %d, want v5 error %d", tc.name, resp.GetVersion(), resp.ErrorCode, tc.code)
		}
		if (tc.code == 0) != (len(resp.ApiKeys) > 0) {
			t.Fatalf("%s: %d keys with error %d", tc.name, len(resp.ApiKeys), resp.ErrorCode)
		}
	}

	// kgo learns the cluster id from Metadata and names it, with the
	// broker's node id, in the ApiVersions of every later connection.
	if _, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if _, err := cl.Broker(int(n.Node.NodeID)).Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("Metadata from node %d on a connection naming it: %v", n.Node.NodeID, err)
		}
	}
}
