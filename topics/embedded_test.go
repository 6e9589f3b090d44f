package topics_test

import (
	"context"
	"net"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/node"
)

// startEmbedded starts `txncoord up` in process on loopback listeners of
// its own: the coordinator node and one leader per entry of
// spec.LeaderVersions (default one 4.2 leader), spec's other fields as
// given (Listen is filled in). cfg, when set, adjusts the config before
// the start (admin listener, log). It returns the cluster file and a kgo
// client seeded with the coordinator node; all end with the test.
func startEmbedded(t *testing.T, spec node.EmbeddedSpec, cfg func(*node.EmbeddedConfig)) (*cluster.File, *node.Embedded, *kgo.Client) {
	t.Helper()
	if spec.CoordinatorVersion == "" {
		spec.CoordinatorVersion = "4.2"
	}
	if len(spec.LeaderVersions) == 0 {
		spec.LeaderVersions = []string{"4.2"}
	}
	if spec.DefaultPartitions == 0 {
		spec.DefaultPartitions = 1
	}
	lns := map[int32]net.Listener{}
	for i := range int32(len(spec.LeaderVersions) + 1) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	spec.Listen = lns[0].Addr().String()
	f, err := spec.ClusterFile()
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Leaders {
		f.Leaders[i].Addr = lns[int32(i+1)].Addr().String()
	}
	ec := node.EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: lns, Log: zerolog.Nop()}
	if cfg != nil {
		cfg(&ec)
	}
	e, err := node.StartEmbedded(ec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.Coordinator.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return f, e, cl
}
