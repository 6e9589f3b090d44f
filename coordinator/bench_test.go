package coordinator

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/txntimeline"
)

// BenchmarkEndTxn measures whole TV2 transactions (leader add v5, EndTxn
// v5, Complete after the markers) against the fsync'ing bbolt store, with
// 1, 16 and 64 transactional ids running concurrently. It reports
// transactions per second and transitions per fsync (group commit at
// work); it never fails on numbers. The transitions are recorded in a
// txntimeline, as the node does.
//
//	go test ./coordinator -run '^$' -bench EndTxn -benchtime 2000x
func BenchmarkEndTxn(b *testing.B) {
	for _, ids := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("ids=%d", ids), func(b *testing.B) {
			store, err := txnlog.OpenBolt(filepath.Join(b.TempDir(), "txnlog.db"), txnlog.BoltOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			c, _ := openTest(b, testView("127.0.0.1:1"), store, true)
			// As the node runs it: every transition recorded.
			c.cfg.Timeline = txntimeline.New(0)
			type producer struct {
				id    string
				pid   int64
				epoch int16
			}
			producers := make([]*producer, ids)
			for i := range producers {
				p := &producer{id: fmt.Sprintf("bench-%d", i)}
				p.pid, p.epoch = initPID(b, c, p.id)
				producers[i] = p
			}
			per := b.N / ids
			if per == 0 {
				per = 1
			}
			before := store.Stats()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, ids)
			for _, p := range producers {
				wg.Add(1)
				go func(p *producer) {
					defer wg.Done()
					for n := 0; n < per; n++ {
						// The previous Complete may still be in flight:
						// the leader retries 51, as Kafka's does.
						for {
							code := addPartitionsV5(c, p.id, p.pid, p.epoch, "orders", int32(n%4))
							if code == 0 {
								break
							}
							if code != kerr.ConcurrentTransactions.Code {
								errs <- fmt.Errorf("%s add: %v", p.id, kerr.ErrorForCode(code))
								return
							}
							time.Sleep(50 * time.Microsecond)
						}
						resp := endTxn(c, 5, p.id, p.pid, p.epoch, true)
						if resp.ErrorCode != 0 {
							errs <- fmt.Errorf("%s end: %v", p.id, kerr.ErrorForCode(resp.ErrorCode))
							return
						}
						p.pid, p.epoch = resp.ProducerID, resp.ProducerEpoch
					}
				}(p)
			}
			wg.Wait()
			for _, p := range producers {
				waitState(b, c, p.id, txnlog.CompleteCommit)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			after := store.Stats()
			txns := float64(per * ids)
			commits := float64(after.Commits - before.Commits)
			b.ReportMetric(txns/elapsed.Seconds(), "txn/s")
			b.ReportMetric(float64(after.Transitions-before.Transitions)/commits, "transitions/fsync")
			b.ReportMetric(commits/txns, "fsyncs/txn")
		})
	}
}
