package workload_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
)

func TestMain(m *testing.M) {
	code := m.Run()
	workload.RemoveSaramaWorker()
	os.Exit(code)
}

// testTimeout bounds a whole test so a hang fails it; nothing waits for it.
const testTimeout = 50 * time.Second

// fakeCluster is a kfake cluster that records the EndTxn version of every
// request, so a test can tell which transaction protocol a client used.
type fakeCluster struct {
	*kfake.Cluster
	mu          sync.Mutex
	endTxnSeen  map[int16]int
	addPartSeen map[int16]int
}

func startFake(t *testing.T) *fakeCluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"), kfake.SeedTopics(2, "u"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &fakeCluster{Cluster: c, endTxnSeen: map[int16]int{}, addPartSeen: map[int16]int{}}
	observe := func(seen map[int16]int) func(kmsg.Request) (kmsg.Response, error, bool) {
		return func(req kmsg.Request) (kmsg.Response, error, bool) {
			f.mu.Lock()
			seen[req.GetVersion()]++
			f.mu.Unlock()
			return nil, nil, false // observe only; kfake handles it
		}
	}
	c.ControlKey(int16(kmsg.EndTxn), observe(f.endTxnSeen))
	c.ControlKey(int16(kmsg.AddPartitionsToTxn), observe(f.addPartSeen))
	return f
}

func (f *fakeCluster) versions() (endTxn, addPartitions map[int16]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := func(m map[int16]int) map[int16]int {
		out := map[int16]int{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return cp(f.endTxnSeen), cp(f.addPartSeen)
}

var partitions = []checker.Partition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "t", Partition: 2}, {Topic: "u", Partition: 0}, {Topic: "u", Partition: 1}}

func config(f *fakeCluster, name string, seed int64) workload.Config {
	return workload.Config{
		Bootstrap:       f.ListenAddrs(),
		TransactionalID: "txn-" + name,
		Prefix:          name,
		Partitions:      partitions,
		TxnSize:         6,
		Txns:            15,
		AbortP:          0.33,
		Seed:            seed,
		OpTimeout:       15 * time.Second,
	}
}

// check reads everything back and runs the checker, failing on any anomaly
// or on a history without both commits and aborts.
func check(t *testing.T, ctx context.Context, f *fakeCluster, h checker.History) *checker.Report {
	t.Helper()
	reads, err := workload.ReadCommitted(ctx, f.ListenAddrs(), partitions)
	if err != nil {
		t.Fatal(err)
	}
	r, err := checker.Check(h, reads)
	if err != nil {
		t.Fatal(err)
	}
	if r.Anomalies() != 0 {
		t.Fatalf("anomalies:\n%s", r.Table())
	}
	if r.TxnsCommitted == 0 || r.TxnsAborted == 0 {
		t.Fatalf("want commits and aborts:\n%s", r.Table())
	}
	if r.TxnsUnknown == 0 && r.ValuesRead != r.ValuesCommitted {
		t.Fatalf("read %d values, committed %d:\n%s", r.ValuesRead, r.ValuesCommitted, r.Table())
	}
	return r
}

// TestDrivers runs each driver alone against kfake, reads back with
// read_committed and checks: zero anomalies with aborts, and the
// transaction protocol the client is expected to use.
func TestDrivers(t *testing.T) {
	for _, tc := range []struct {
		name string
		// The EndTxn versions the client must use (TV2 is EndTxn v5).
		endTxnMin, endTxnMax int16
		addPartitions        bool // TV1 clients send AddPartitionsToTxn
	}{
		{"kgo-tv2", 5, 5, false},
		{"kgo-tv1", 0, 4, true},
		{"sarama", 0, 4, true},
		{"confluent", 0, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := startFake(t)
			h, err := workload.Drivers[tc.name](ctx, config(f, tc.name, 7))
			if err != nil {
				t.Fatal(err)
			}
			r := check(t, ctx, f, h)
			endTxn, addPart := f.versions()
			for v := range endTxn {
				if v < tc.endTxnMin || v > tc.endTxnMax {
					t.Errorf("EndTxn v%d used, want v%d-v%d (all: %v)", v, tc.endTxnMin, tc.endTxnMax, endTxn)
				}
			}
			if len(endTxn) == 0 {
				t.Error("no EndTxn seen")
			}
			if got := len(addPart) > 0; got != tc.addPartitions {
				t.Errorf("AddPartitionsToTxn seen: %v, want %v", addPart, tc.addPartitions)
			}
			t.Logf("%s: %s; EndTxn versions %v", tc.name, r.Summary(), endTxn)
		})
	}
}

// TestMixedDrivers runs all four drivers at once on the same partitions and
// checks the merged history; then shows that the checker would notice a
// wrong outcome, so the read really covers the values.
func TestMixedDrivers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := startFake(t)
	var (
		mu   sync.Mutex
		all  checker.History
		wg   sync.WaitGroup
		errs = make(chan error, len(workload.Drivers))
	)
	seed := int64(0)
	for name, drive := range workload.Drivers {
		seed++
		seed := seed
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := config(f, "mixed-"+name, seed)
			cfg.Txns = 8
			h, err := drive(ctx, cfg)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
			mu.Lock()
			all.Merge(h)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	check(t, ctx, f, all)

	// Pretend one committed transaction had aborted: its values must now
	// be reported as aborted reads.
	reads, err := workload.ReadCommitted(ctx, f.ListenAddrs(), partitions)
	if err != nil {
		t.Fatal(err)
	}
	for i := range all.Txns {
		if all.Txns[i].Outcome == checker.Committed {
			all.Txns[i].Outcome = checker.Aborted
			r, err := checker.Check(all, reads)
			if err != nil {
				t.Fatal(err)
			}
			if r.Counts[checker.AbortedRead] != len(all.Txns[i].Writes) {
				t.Fatalf("relabelled txn: %s", r.Summary())
			}
			break
		}
	}
}

// TestUntilCancelled: with Txns = 0 a driver runs until ctx is done and
// leaves no transaction open (the final read does not wait). For sarama in
// a -race binary this is the child process stopped by SIGTERM.
func TestUntilCancelled(t *testing.T) {
	for _, name := range []string{"kgo-tv2", "sarama"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := startFake(t)
			cfg := config(f, "forever-"+name, 3)
			cfg.Txns = 0
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan checker.History, 1)
			go func() {
				h, err := workload.Drivers[name](runCtx, cfg)
				if err != nil {
					t.Error(err)
				}
				done <- h
			}()
			// Let it commit a few transactions, observed through the cluster.
			for ended := 0; ended < 5 && ctx.Err() == nil; {
				time.Sleep(10 * time.Millisecond)
				endTxn, _ := f.versions()
				ended = 0
				for _, n := range endTxn {
					ended += n
				}
			}
			stop()
			h := <-done
			t.Logf("%d transactions before cancel", len(h.Txns))
			if len(h.Txns) < 5 {
				t.Fatalf("only %d transactions before cancel", len(h.Txns))
			}
			reads, err := workload.ReadCommitted(ctx, f.ListenAddrs(), partitions)
			if err != nil {
				t.Fatal(err)
			}
			r, err := checker.Check(h, reads)
			if err != nil {
				t.Fatal(err)
			}
			if r.Anomalies() != 0 || r.TxnsOpen != 0 {
				t.Fatalf("after cancel:\n%s", r.Table())
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []workload.Config{
		{Bootstrap: []string{"127.0.0.1:1"}, Partitions: partitions},
		{TransactionalID: "x", Partitions: partitions},
		{TransactionalID: "x", Bootstrap: []string{"127.0.0.1:1"}},
		{TransactionalID: "x", Bootstrap: []string{"127.0.0.1:1"}, Partitions: partitions,
			Security: &workload.Security{CAFile: "ca.crt", User: "u", Mechanism: "GSSAPI"}},
		{TransactionalID: "x", Bootstrap: []string{"127.0.0.1:1"}, Partitions: partitions,
			Security: &workload.Security{User: "u"}},
		{TransactionalID: "x", Bootstrap: []string{"127.0.0.1:1"}, Partitions: partitions,
			Security: &workload.Security{CAFile: "ca.crt"}},
	} {
		if _, err := workload.KgoTV2(context.Background(), cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// TestUnknownOutcome: a commit that fails (the cluster answers
// INVALID_TXN_STATE without committing) is recorded as Unknown, the driver
// starts over with a new client, and the checker accepts the transaction
// resolving as aborted (all-or-nothing).
func TestUnknownOutcome(t *testing.T) {
	for _, name := range []string{"kgo-tv2", "sarama"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := startFake(t)
			f.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
				end := req.(*kmsg.EndTxnRequest)
				if !end.Commit {
					return nil, nil, false
				}
				resp := end.ResponseKind().(*kmsg.EndTxnResponse)
				resp.SetVersion(end.GetVersion())
				resp.ErrorCode = kerr.InvalidTxnState.Code
				return resp, nil, true // handled once, then dropped
			})
			cfg := config(f, "unknown-"+name, 11)
			cfg.AbortP = 0.2
			h, err := workload.Drivers[name](ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := check(t, ctx, f, h)
			if r.TxnsUnknown != 1 || r.UnknownInvisible != 1 {
				t.Fatalf("want one unknown txn resolved as aborted:\n%s", r.Table())
			}
		})
	}
}
