// Package clustertest starts real txncoord protocol servers for tests: one
// wire.Server per node of a cluster file, each on its own 127.0.0.1:0
// listener, each with its own cluster.View built from the same file (as
// separate processes would), serving Metadata and FindCoordinator plus any
// handlers the test adds. It is for tests only; it must not be imported by
// production code.
package clustertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/wire"
)

// Options describe the cluster to start.
type Options struct {
	// CoordinatorVersion and LeaderVersions are kafka_version values;
	// defaults "4.2" and one "4.2" leader.
	CoordinatorVersion string
	LeaderVersions     []string
	Topics             map[string]int32
	DefaultPartitions  int32
	// Register adds handlers to a node's registry (nil: none).
	Register func(node cluster.Node, reg *wire.Registry)
	// Tune adjusts a node's wire.Config before it starts (nil: none).
	Tune func(node cluster.Node, cfg *wire.Config)
	// Log receives every node's logs (zero: discarded).
	Log zerolog.Logger
}

// Node is one started node.
type Node struct {
	cluster.Node
	View   *cluster.View
	Server *wire.Server
}

// Cluster is the started cluster.
type Cluster struct {
	File  *cluster.File
	Nodes []Node // coordinator first, then leaders in file order
}

// Coordinator is the coordinator node.
func (c *Cluster) Coordinator() Node { return c.Nodes[0] }

// Start listens for every node first (so the file holds real addresses),
// then starts the servers. Shutdown is registered with t.Cleanup.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.CoordinatorVersion == "" {
		o.CoordinatorVersion = "4.2"
	}
	if len(o.LeaderVersions) == 0 {
		o.LeaderVersions = []string{"4.2"}
	}
	listeners := make([]net.Listener, 1+len(o.LeaderVersions))
	for i := range listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		listeners[i] = ln
		t.Cleanup(func() { ln.Close() }) // if a later step fails before Start
	}
	f := &cluster.File{
		ClusterID:         "clustertest",
		Coordinator:       &cluster.Node{NodeID: 0, Addr: listeners[0].Addr().String(), KafkaVersion: o.CoordinatorVersion},
		DefaultPartitions: o.DefaultPartitions,
		Topics:            o.Topics,
	}
	if f.DefaultPartitions == 0 {
		f.DefaultPartitions = 3
	}
	for i, v := range o.LeaderVersions {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: int32(i + 1), Addr: listeners[i+1].Addr().String(), KafkaVersion: v})
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("cluster file: %v", err)
	}
	c := &Cluster{File: f}
	for i, n := range append([]cluster.Node{*f.Coordinator}, f.Leaders...) {
		view := cluster.NewView(f)
		reg := wire.NewRegistry()
		view.RegisterMetadata(reg)
		view.RegisterFindCoordinator(reg)
		if o.Register != nil {
			o.Register(n, reg)
		}
		profile, err := negotiation.Profile(n.KafkaVersion)
		if err != nil {
			t.Fatal(err)
		}
		version := n.KafkaVersion
		cfg := wire.Config{
			Listener:  listeners[i],
			Registry:  reg,
			Profile:   profile,
			Features:  func() wire.Features { return view.Features(version) },
			ClusterID: view.ClusterID(),
			NodeID:    n.NodeID,
			Log:       o.Log.With().Int32("node", n.NodeID).Logger(),
		}
		if o.Tune != nil {
			o.Tune(n, &cfg)
		}
		srv, err := wire.Start(cfg)
		if err != nil {
			t.Fatalf("start node %d: %v", n.NodeID, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
		c.Nodes = append(c.Nodes, Node{Node: n, View: view, Server: srv})
	}
	return c
}
