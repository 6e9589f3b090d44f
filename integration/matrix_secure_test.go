package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
	"github.com/txncoord/txncoord/security"
)

// TestMatrixSecure runs part of the version matrix again with TLS + SASL
// SCRAM-SHA-512 on every listener and cluster authorization on: the 4.2
// coordinator with all-4.2 and mixed 4.2/4.1 leaders, all four clients.
// Each cell is judged as in TestMatrix (checker, then the WriteTxnMarkers
// version and TV at each leader); security must change neither.
func TestMatrixSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the secure matrix runs 8 cells")
	}
	const coord = "4.2"
	for _, set := range matrixLeaderSets {
		if set.name != "all-4.2" && set.name != "mixed-4.2-4.1" {
			continue
		}
		t.Run(fmt.Sprintf("coord=%s/leaders=%s", coord, set.name), func(t *testing.T) {
			t.Parallel()
			runMatrixCluster(t, Options{CoordinatorVersion: coord, LeaderVersions: set.versions, Secure: true}, nil)
		})
	}
}

// workloadSecurity is how workload drivers reach c: nil for a plaintext
// cluster, else TLS against the generated CA and SCRAM-SHA-512 as the
// client user (the same identity as Client()).
func (c *Cluster) workloadSecurity() *workload.Security {
	if c.local == nil {
		return nil
	}
	return &workload.Security{
		CAFile:    c.local.CAFile,
		User:      c.local.ClientUser,
		Password:  c.local.ClientPassword,
		Mechanism: workload.MechanismSCRAMSHA512,
	}
}

// TestWorkloadSecurity checks the drivers' security settings against one
// secure cluster: every driver (and the reader) works with each SASL
// mechanism the listener offers, and fails without TLS + SASL, with a
// CA that did not sign the node certificate, or with a wrong password, so
// a passing TestMatrixSecure cannot come from a driver skipping either.
func TestWorkloadSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs every driver 6 times")
	}
	c := StartCluster(t, Options{Secure: true, LeaderVersions: []string{"4.2"}, Topics: map[string]int32{"sec": 2}})
	good := c.workloadSecurity()
	other, err := security.GenerateLocal(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*workload.Security)) *workload.Security {
		s := *good
		f(&s)
		return &s
	}
	cases := []struct {
		name string
		sec  *workload.Security
		ok   bool
	}{
		{"PLAIN", with(func(s *workload.Security) { s.Mechanism = workload.MechanismPlain }), true},
		{"SCRAM-SHA-256", with(func(s *workload.Security) { s.Mechanism = workload.MechanismSCRAMSHA256 }), true},
		{"plaintext", nil, false},
		{"other-CA", with(func(s *workload.Security) { s.CAFile = other.CAFile }), false},
		{"wrong-password", with(func(s *workload.Security) { s.Password = other.ClientPassword }), false},
	}
	ps := []checker.Partition{{Topic: "sec", Partition: 0}, {Topic: "sec", Partition: 1}}
	ctx := testCtx(t, time.Minute)
	type result struct {
		h   checker.History
		err error
	}
	results := make(map[string]result)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, tc := range cases {
		for _, client := range matrixClients {
			name := tc.name + "/" + client
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := workload.Config{
					Bootstrap:       c.Bootstrap(),
					TransactionalID: "sec-" + strings.ReplaceAll(name, "/", "-"),
					Partitions:      ps,
					TxnSize:         2,
					Txns:            2,
					Seed:            1,
					Security:        tc.sec,
					Log:             zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel),
				}
				if !tc.ok {
					// One attempt, bounded: librdkafka retries a
					// failed handshake until its operation times out.
					cfg.MaxFailures, cfg.Txns, cfg.OpTimeout = 1, 2, 3*time.Second
				}
				h, err := workload.Drivers[client](ctx, cfg)
				mu.Lock()
				results[name] = result{h, err}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, client := range matrixClients {
				res := results[tc.name+"/"+client]
				committed := 0
				for _, txn := range res.h.Txns {
					if txn.Outcome != checker.Aborted {
						committed++
					}
				}
				switch {
				case tc.ok && (res.err != nil || committed != 2):
					t.Errorf("%s: %d of 2 transactions committed, err %v", client, committed, res.err)
				case !tc.ok && (res.err == nil || committed != 0):
					t.Errorf("%s: accepted (%d transactions committed or unknown, err %v)", client, committed, res.err)
				case !tc.ok:
					t.Logf("%s refused: %v", client, res.err)
				}
			}
		})
	}
	// The reader honours the mechanisms too, and fails the same way.
	readErrs := make([]error, len(cases))
	readN := make([]int, len(cases))
	for i, tc := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			reads, err := workload.ReadCommittedSecure(rctx, c.Bootstrap(), tc.sec, ps)
			readErrs[i] = err
			for _, p := range ps {
				readN[i] += len(reads[p])
			}
		}()
	}
	wg.Wait()
	want := len(matrixClients) * 2 * 2 * 2 // two mechanisms × clients × 2 txns × 2 values
	for i, tc := range cases {
		if tc.ok != (readErrs[i] == nil) || (tc.ok && readN[i] != want) {
			t.Errorf("reader %s: read %d values (want %d), err %v; want ok=%v", tc.name, readN[i], want, readErrs[i], tc.ok)
		}
	}
}
