package groupsetcd

import (
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/txncoord/txncoord/internal/freeport"
	"github.com/txncoord/txncoord/txnetcd"
)

// startFsyncEtcd starts a one-member embedded etcd that fsyncs (etcdtest's
// members do not: their tests do not measure etcd), so that the benchmark
// measures a real etcd write, as txnetcd's BenchmarkApply does. It returns
// a client, closed with the member when the benchmark ends.
func startFsyncEtcd(b *testing.B) *clientv3.Client {
	b.Helper()
	port, err := freeport.Run(2)
	if err != nil {
		b.Fatal(err)
	}
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port+1)}
	cfg := embed.NewConfig()
	cfg.Name = "groupsetcd-bench"
	cfg.Dir = b.TempDir()
	cfg.Logger, cfg.LogLevel = "zap", "fatal"
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		b.Fatal("etcd did not become ready")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return cli
}

// BenchmarkAppendWaitDurable: Append of a one-offset record and
// WaitDurable of it, as an OffsetCommit does, by 1 and by 16 goroutines,
// against an embedded one-member etcd with fsync on (same process, same
// cores). With 16 writers the records queued during one Txn share the
// next: records/txn says how many.
//
//	go test -run '^$' -bench BenchmarkAppendWaitDurable -benchtime 3s ./groupsetcd/
func BenchmarkAppendWaitDurable(b *testing.B) {
	cli := startFsyncEtcd(b)
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers-%d", writers), func(b *testing.B) {
			l := groupsLayout(b)
			log := Open(txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1}), acquire(b, cli, l, 0, 1), Options{})
			defer log.Close()
			recs := make([][]byte, 1000)
			for i := range recs {
				recs[i] = rec(b, "offsets", fmt.Sprintf("group-%d/topic/%d", i, i%12), fmt.Sprintf(`{"offset":%d}`, i))
			}
			ctx := ctxT(b)
			var next atomic.Int64
			b.ResetTimer()
			b.SetParallelism((writers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					pos, err := log.Append(recs[next.Add(1)%int64(len(recs))])
					if err == nil {
						err = log.Log().WaitDurable(ctx, pos)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := log.Stats()
			b.ReportMetric(float64(st.Records)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(st.Records)/float64(max(st.Txns, 1)), "records/txn")
		})
	}
}
