package node

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/etcdtest"
)

// TestEtcdCoordinatorOwnDataDirAndFileLease: a coordinator other than node
// 0, in a process of its own, creates and locks its data dir (a second
// process on the same dir is refused), and holds its partitions with the
// cluster file's lease unless its flag overrides it.
func TestEtcdCoordinatorOwnDataDirAndFileLease(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	f := &cluster.File{ClusterID: "own-dir", DefaultPartitions: 1, TransactionStatePartitions: 4,
		Etcd: &cluster.Etcd{Endpoints: etcd.Endpoints(), LeaseTTLSeconds: 3}}
	for id := range int32(3) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		n := cluster.Node{NodeID: id, Addr: addr, KafkaVersion: "4.2"}
		if id < 2 {
			f.Coordinators = append(f.Coordinators, n)
		} else {
			f.Leaders = append(f.Leaders, n)
		}
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "coordinator-1")
	start := func(ttl time.Duration) (*Coordinator, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		co, err := StartCoordinator(CoordinatorConfig{View: cluster.NewView(f), DataDir: dir, NodeID: 1, Listener: ln,
			LeaseTTL: ttl, Log: zerolog.Nop()})
		if err != nil {
			ln.Close()
		}
		return co, err
	}
	stop := func(co *Coordinator) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := co.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
	co, err := start(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "coordinator", "LOCK")); err != nil {
		t.Errorf("coordinator 1 did not create and lock its data dir: %v", err)
	}
	if got := co.Member.LeaseTTL(); got != 3*time.Second {
		t.Errorf("lease %s, want the cluster file's 3s", got)
	}
	if second, err := start(0); err == nil {
		stop(second)
		t.Error("a second coordinator process started on the same data dir")
	} else if !strings.Contains(err.Error(), "in use by pid") {
		t.Errorf("second process on the same data dir: %v, want \"in use by pid\"", err)
	}
	stop(co)
	co, err = start(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(co)
	if got := co.Member.LeaseTTL(); got != 2*time.Second {
		t.Errorf("lease %s, want the flag's 2s over the file's 3s", got)
	}
}
