package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txncoord/txncoord/integration/eos"
)

// The exactly-once chain (package eos) with each client: an input topic of
// numbered values, two consume-transform-produce stages of member
// processes, members joining, leaving and SIGKILLed while the chain runs,
// and in the fault tests SIGKILL bounces of the coordinator; then every
// value must be in the read_committed output exactly once, nothing from an
// aborted attempt, and both groups' offsets must resume at the end.
//
// Each chain runs against franz-go's kfake (the reference: it serves
// groups and transactions) and against txncoord.

const (
	eosValues     = 2000
	eosPartitions = 6
)

var eosMember helperBin

// eosMemberBinary builds ./integration/eos/eosmember once per test run.
func eosMemberBinary(t testing.TB) string {
	t.Helper()
	return eosMember.build(t, "eosmember", "./integration/eos/eosmember")
}

// helperBin is a helper program of the tests, built once per test run
// beside the txncoord binary (TestMain removes that directory).
type helperBin struct {
	once sync.Once
	path string
	err  error
}

// build builds pkg as name once and returns its path.
func (h *helperBin) build(t testing.TB, name, pkg string) string {
	t.Helper()
	txncoordBinary(t) // makes binary.dir
	h.once.Do(func() {
		h.path = filepath.Join(binary.dir, name)
		cmd := exec.Command("go", "build", "-o", h.path, pkg)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			h.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
	})
	if h.err != nil {
		t.Fatal(h.err)
	}
	return h.path
}

func eosTopics(name string) []string {
	return []string{name + "-in", name + "-mid", name + "-out"}
}

func eosTopicMap(topics []string, partitions int32) map[string]int32 {
	m := map[string]int32{}
	for _, t := range topics {
		m[t] = partitions
	}
	return m
}

// startEOSKfake starts a kfake cluster of three brokers with the chain's
// topics.
func startEOSKfake(t *testing.T, topics []string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(eosPartitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// runEOS runs one chain and fails the test on any anomaly.
func runEOS(t *testing.T, ctx context.Context, cfg eos.Config) *eos.Report {
	t.Helper()
	return runEOSBin(t, ctx, cfg, eosMemberBinary(t))
}

// runEOSBin is runEOS with another member program (cfg.MemberArgs).
func runEOSBin(t *testing.T, ctx context.Context, cfg eos.Config, bin string) *eos.Report {
	t.Helper()
	cfg.MemberBin = bin
	if cfg.Dir == "" {
		cfg.Dir = keptDir(t)
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = eosPartitions
	}
	cfg.Logf = t.Logf
	rep, err := eos.Run(ctx, cfg)
	if rep != nil {
		t.Logf("%s chain: %s\n%s", cfg.Client, rep.Summary(), rep.Table())
	}
	if err != nil {
		eosLogs(t, cfg.Dir)
		t.Fatal(err)
	}
	if rep.Anomalies() != 0 {
		eosLogs(t, cfg.Dir)
		t.Fatalf("anomalies: %s", rep.Summary())
	}
	return rep
}

// eosLogs prints the tail of every member's log, for a failure.
func eosLogs(t *testing.T, dir string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "s*.log"))
	for _, p := range paths {
		t.Logf("--- %s\n%s", filepath.Base(p), tailN(p, 1500))
	}
}

func tailN(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// eosChurn is the member churn of every default run: stage 1 loses a
// member gracefully and gets it back, stage 2 gains a fourth member, and a
// member of each stage is SIGKILLed and restarted.
func eosChurn() []eos.Event {
	return []eos.Event{
		{At: 0.10, Kind: eos.LeaveMember, Stage: 1, Slot: 0, Pause: 2 * time.Second},
		{At: 0.25, Kind: eos.AddMember, Stage: 2},
		{At: 0.40, Kind: eos.KillMember, Stage: 2, Slot: 1},
		{At: 0.55, Kind: eos.KillMember, Stage: 1, Slot: 2},
		{At: 0.70, Kind: eos.LeaveMember, Stage: 2, Slot: 0, Pause: time.Second},
	}
}

func eosValuesFromEnv(def int) int {
	if v, err := strconv.Atoi(os.Getenv("TXNCOORD_EOS_VALUES")); err == nil && v > 0 {
		return v
	}
	return def
}

// eosConfig is a default run of client: eosValues values in transactions
// of up to 20, paced so that the churn lands while the chain runs.
func eosConfig(client string, boot []string, topics []string) eos.Config {
	abortP := 0.1
	if client == "sarama" {
		abortP = 0.03 // each abort is a rejoin (eos/member_sarama.go)
	}
	return eos.Config{
		Bootstrap: boot, Client: client, Values: eosValuesFromEnv(eosValues), Topics: topics,
		AbortP: abortP, BatchMax: 20, Pause: 150 * time.Millisecond, Events: eosChurn(), Seed: 1,
	}
}

func TestEOSKfake(t *testing.T) {
	for _, client := range []string{"kgo", "sarama", "confluent"} {
		t.Run(client, func(t *testing.T) {
			topics := eosTopics("eos-" + client)
			runEOS(t, testCtx(t, 3*time.Minute), eosConfig(client, startEOSKfake(t, topics), topics))
		})
	}
}
