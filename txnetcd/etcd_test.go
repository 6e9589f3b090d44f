package txnetcd

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/txncoord/txncoord/internal/freeport"
)

// One embedded single-member etcd serves the whole test binary (starting
// one takes about a second); every test works under a prefix of its own.
// It keeps fsync on, so the benchmarks measure a real etcd write.
var (
	etcdEndpoint string
	// etcdMember is the test member, for in-process clients (the
	// embedded member of `txncoord up`).
	etcdMember *embed.Etcd
)

func TestMain(m *testing.M) {
	os.Exit(runWithEtcd(m))
}

func runWithEtcd(m *testing.M) int {
	dir, err := os.MkdirTemp("", "txnetcd-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	port, err := freeport.Run(2)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port+1)}
	cfg := embed.NewConfig()
	cfg.Name = "txnetcd-test"
	cfg.Dir = dir
	cfg.Logger, cfg.LogLevel = "zap", "fatal" // its shutdown logs errors for its own closed listeners
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start etcd:", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd did not become ready")
		return 1
	}
	etcdEndpoint, etcdMember = client.String(), e
	return m.Run()
}

// newClient is a client of the test etcd, closed at the end of the test.
func newClient(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

var prefixSeq atomic.Int64

// newLayout is a layout no other test uses.
func newLayout(tb testing.TB) Layout {
	return Layout{Prefix: fmt.Sprintf("/txncoord/test-%d-%s", prefixSeq.Add(1), tb.Name())}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// acquire does what the ownership side does at a takeover, by the layout's
// rule: one Txn, If(owner key missing) Then(epoch+1, owner with lease).
// Here the previous owner may be still there (a test simulates a takeover
// by rewriting it), so it conditions on the epoch key instead.
func acquire(tb testing.TB, cli *clientv3.Client, l Layout, p, node int32, opts ...clientv3.OpOption) Fence {
	tb.Helper()
	ctx := ctxT(tb)
	resp, err := cli.Get(ctx, l.EpochKey(p))
	if err != nil {
		tb.Fatal(err)
	}
	var epoch int64
	var modRev int64
	if len(resp.Kvs) > 0 {
		epoch, _ = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 32)
		modRev = resp.Kvs[0].ModRevision
	}
	owner := Owner{NodeID: node, Epoch: int32(epoch + 1)}
	txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(l.EpochKey(p)), "=", modRev)).Then(
		clientv3.OpPut(l.EpochKey(p), strconv.FormatInt(epoch+1, 10)),
		clientv3.OpPut(l.OwnerKey(p), owner.Value(), opts...),
	).Commit()
	if err != nil || !txn.Succeeded {
		tb.Fatalf("acquire partition %d: %v (succeeded %v)", p, err, txn != nil && txn.Succeeded)
	}
	return NewFence(p, owner)
}
