package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/internal/freeport"
	"github.com/txncoord/txncoord/markersender"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// txncoordBinary builds the command once per test run.
func txncoordBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "txncoord-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "txncoord")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// freePortRun finds n consecutive free loopback ports (up needs the
// coordinator's port followed by one per leader).
func freePortRun(t *testing.T, n int) int {
	t.Helper()
	base, err := freeport.Run(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// upProcess is a running `txncoord up`.
type upProcess struct {
	cmd       *exec.Cmd
	bootstrap string
	adminURL  string
	stderr    *strings.Builder
	done      chan error
}

func startUp(t *testing.T, args ...string) *upProcess {
	t.Helper()
	cmd := exec.Command(txncoordBinary(t), append([]string{"up"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &upProcess{cmd: cmd, stderr: &strings.Builder{}, done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("txncoord up exited before ready: %s", p.stderr)
		}
		fields := map[string]string{}
		if !strings.HasPrefix(line, "txncoord ready ") {
			t.Fatalf("first line %q is not the ready line", line)
		}
		for _, tok := range strings.Fields(strings.TrimPrefix(line, "txncoord ready ")) {
			k, v, _ := strings.Cut(tok, "=")
			fields[k] = v
		}
		p.bootstrap, p.adminURL = fields["bootstrap"], fields["admin"]
		go func() {
			for range lines {
				t.Errorf("txncoord up printed more than one line on stdout")
			}
		}()
	case <-time.After(60 * time.Second):
		t.Fatalf("txncoord up not ready in 60 s: %s", p.stderr)
	}
	return p
}

// stop sends SIGTERM and requires exit 0 within 15 s.
func (p *upProcess) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("txncoord up exited with %v after SIGTERM: %s", err, p.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("txncoord up did not stop within 15 s of SIGTERM")
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// cli runs an admin command and returns stdout, stderr and the exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(txncoordBinary(t), args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func cliJSON(t *testing.T, out any, args ...string) {
	t.Helper()
	stdout, stderr, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("txncoord %v: exit %d: %s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("txncoord %v: not JSON: %v\n%s", args, err, stdout)
	}
}

func TestUpEndToEnd(t *testing.T) {
	base := freePortRun(t, 5)
	dataDir := t.TempDir()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", base+4)
	up := startUp(t, "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.2,4.1", "--topics", "orders:6", "--admin-listen", adminAddr)
	if up.bootstrap != fmt.Sprintf("127.0.0.1:%d", base) || up.adminURL != "http://"+adminAddr {
		t.Fatalf("ready line: bootstrap=%s admin=%s", up.bootstrap, up.adminURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.TransactionalID("e2e-app"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txn := func(value string, commit bool) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 6; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(value)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end txn: %v", err)
		}
	}
	txn("committed", true)
	txn("aborted", false)
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adminFlag := []string{"--admin", up.adminURL, "-o", "json"}

	// The second transaction's Complete* may still be on its way.
	var described admin.Txn
	for deadline := time.Now().Add(20 * time.Second); ; {
		cliJSON(t, &described, append([]string{"txn", "describe", "--transactional-id", "e2e-app"}, adminFlag...)...)
		if described.State == "CompleteAbort" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if described.State != "CompleteAbort" || described.ProducerID != pid || described.ProducerEpoch != epoch || described.TransactionVersion != 2 {
		t.Fatalf("describe: %+v; client has pid %d epoch %d", described, pid, epoch)
	}
	var listed []admin.Txn
	cliJSON(t, &listed, append([]string{"txn", "list"}, adminFlag...)...)
	if len(listed) != 1 || listed[0].TransactionalID != "e2e-app" { // before abort-me exists
		t.Fatalf("list: %+v", listed)
	}
	cliJSON(t, &listed, append([]string{"txn", "list", "--state", "Ongoing"}, adminFlag...)...)
	if len(listed) != 0 {
		t.Fatalf("list --state Ongoing: %+v", listed)
	}

	var leaders []markersender.LeaderStatus
	cliJSON(t, &leaders, append([]string{"leaders"}, adminFlag...)...)
	if len(leaders) != 3 {
		t.Fatalf("leaders: %+v", leaders)
	}
	for _, l := range leaders {
		want := int16(2)
		if l.KafkaVersion == "4.1" {
			want = 1
		}
		if l.WriteTxnMarkers.InUse != want || l.WriteTxnMarkers.Max != want || !l.Connected {
			t.Fatalf("leader %d (%s): %+v, want in_use %d", l.NodeID, l.KafkaVersion, l, want)
		}
	}

	var producers []map[string]any
	cliJSON(t, &producers, append([]string{"producers", "--topic", "orders", "--partition", "0"}, adminFlag...)...)
	if len(producers) != 1 || int64(producers[0]["producer_id"].(float64)) != pid || int16(producers[0]["producer_epoch"].(float64)) != epoch {
		t.Fatalf("producers: %+v (pid %d epoch %d)", producers, pid, epoch)
	}
	var markers []markersender.PendingTxn
	cliJSON(t, &markers, append([]string{"markers"}, adminFlag...)...)
	if len(markers) != 0 {
		t.Fatalf("markers pending after completion: %+v", markers)
	}
	var hanging []map[string]any
	cliJSON(t, &hanging, append([]string{"txn", "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0s"}, adminFlag...)...)
	if len(hanging) != 0 {
		t.Fatalf("find-hanging: %+v", hanging)
	}

	resp, err := http.Get(up.adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(body)
	for _, want := range []string{
		`txncoord_markers_sent_total{leader="1",version="2"}`,
		`txncoord_markers_sent_total{leader="3",version="1"}`,
		`txncoord_coordinator_transactions{state="CompleteAbort"} 1`,
		"go_goroutines",
		"txncoord_txnlog_fsyncs_total",
		`txncoord_coordinator_end_txn_seconds_count{result="commit"} 1`,
		`txncoord_coordinator_end_txn_seconds_count{result="abort"} 1`,
		"txncoord_txnlog_transitions_total",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// An operator aborts an open transaction: refused without --yes when
	// no terminal can confirm, done with it; the producer's commit fails.
	victim, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.TransactionalID("abort-me"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	if err := victim.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := victim.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("doomed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "txn", "abort", "--transactional-id", "abort-me", "--admin", up.adminURL); code != 2 || !strings.Contains(stderr, "--yes") {
		t.Fatalf("abort without --yes: exit %d: %s", code, stderr)
	}
	var aborted admin.Txn
	cliJSON(t, &aborted, append([]string{"txn", "abort", "--transactional-id", "abort-me", "--yes"}, adminFlag...)...)
	if aborted.State != "PrepareAbort" && aborted.State != "CompleteAbort" {
		t.Fatalf("after txn abort: %+v", aborted)
	}
	if err := victim.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the aborted transaction committed")
	}

	// Table output is aligned and names the columns.
	stdout, _, code := runCLI(t, "leaders", "--admin", up.adminURL)
	if code != 0 || !strings.HasPrefix(stdout, "NodeId") || !strings.Contains(stdout, "4.1") {
		t.Fatalf("leaders table: %q", stdout)
	}
	up.stop(t)

	// A restart on the same data dir loses nothing.
	up = startUp(t, "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.2,4.1", "--topics", "orders:6", "--admin-listen", adminAddr)
	cliJSON(t, &described, append([]string{"txn", "describe", "--transactional-id", "e2e-app"}, adminFlag...)...)
	if described.State != "CompleteAbort" || described.ProducerID != pid || described.ProducerEpoch != epoch {
		t.Fatalf("after restart: %+v", described)
	}
	up.stop(t)
}

func TestBadInputExitCodes(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := freePortRun(t, 3)
	clash, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+1))
	if err != nil {
		t.Fatal(err)
	}
	defer clash.Close()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"up", "--no-such-flag"}, 2, "no-such-flag"},
		{"unknown command", []string{"frobnicate"}, 2, "frobnicate"},
		{"bad leaders", []string{"up", "--leaders", "4.2,5.0", "--listen", "127.0.0.1:1"}, 2, "5.0"},
		{"bad topics", []string{"up", "--topics", "orders:zero"}, 2, "orders:zero"},
		{"missing leader file", []string{"coordinator", "--cluster", writeFile("noleader.yaml", "coordinator: {node_id: 0, addr: 127.0.0.1:1, kafka_version: \"4.2\"}\n")}, 2, "no leaders"},
		{"duplicate node id", []string{"leader", "--node-id", "1", "--cluster", writeFile("dup.yaml", "coordinator: {node_id: 1, addr: 127.0.0.1:1, kafka_version: \"4.2\"}\nleaders:\n  - {node_id: 1, addr: 127.0.0.1:2, kafka_version: \"4.2\"}\n")}, 2, "duplicate node_id"},
		{"unknown version", []string{"coordinator", "--cluster", writeFile("ver.yaml", "coordinator: {node_id: 0, addr: 127.0.0.1:1, kafka_version: \"9.9\"}\nleaders:\n  - {node_id: 1, addr: 127.0.0.1:2, kafka_version: \"4.2\"}\n")}, 2, "9.9"},
		{"port clash", []string{"up", "--data-dir", filepath.Join(dir, "clash"), "--listen", fmt.Sprintf("127.0.0.1:%d", base), "--leaders", "4.2", "--admin-listen", "127.0.0.1:0"}, 1, "address already in use"},
		{"unreachable admin", []string{"txn", "list", "--admin", "http://127.0.0.1:1"}, 1, "unreachable"},
		{"positional argument", []string{"txn", "describe", "some-id"}, 2, "named flags"},
		{"abort without --yes", []string{"txn", "abort", "--transactional-id", "x", "--admin", "http://127.0.0.1:1"}, 1, "unreachable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr does not name the problem (%q): %s", tc.want, stderr)
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Fatalf("stack trace on stderr: %s", stderr)
			}
		})
	}
}

// --producer-id-expiration reaches the leaders of `up`: an idempotent
// producer's state is listed by `txncoord producers`, then forgotten once
// the expiration has passed without a write.
func TestUpExpiresProducers(t *testing.T) {
	base := freePortRun(t, 5)
	adminAddr := fmt.Sprintf("127.0.0.1:%d", base+4)
	up := startUp(t, "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--topics", "events:1", "--admin-listen", adminAddr, "--producer-id-expiration", "4s")
	defer up.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner())) // idempotent by default
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		var producers []map[string]any
		cliJSON(t, &producers, "producers", "--topic", "events", "--partition", "0", "--admin", up.adminURL, "-o", "json")
		return len(producers)
	}
	if n := listed(); n != 1 {
		t.Fatalf("%d producers listed after one idempotent produce, want 1", n)
	}
	for deadline := time.Now().Add(20 * time.Second); listed() != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the producer was still listed 20 s after its 4 s expiration")
		}
	}
}

// TestUpCleanerDefaults: the log cleaner's broker defaults given to `up`
// are written to the data dir's cluster file under their snake_case keys,
// described on the BROKER resource as STATIC_BROKER_CONFIG, and inherited
// by a topic that does not set them; one not given stays Kafka's default.
func TestUpCleanerDefaults(t *testing.T) {
	base := freePortRun(t, 5)
	dataDir := t.TempDir()
	up := startUp(t, "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", base), "--leaders", "4.2",
		"--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+4), "--log-cleanup-policy", "compact,delete",
		"--log-cleaner-delete-retention-ms", "1000", "--log-cleaner-min-cleanable-ratio", "0.25")
	defer up.stop(t)
	raw, err := os.ReadFile(filepath.Join(dataDir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"log_cleanup_policy: compact,delete", "log_cleaner_delete_retention_ms: 1000", "log_cleaner_min_cleanable_ratio: 0.25"} {
		if !strings.Contains(string(raw), line+"\n") {
			t.Errorf("cluster.yaml lacks %q:\n%s", line, raw)
		}
	}
	if strings.Contains(string(raw), "compaction_lag") {
		t.Errorf("cluster.yaml sets a default that was not given:\n%s", raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	brokers, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := brokers.On("1", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := valueSources(rc, "log.cleanup.policy", "log.cleaner.delete.retention.ms", "log.cleaner.min.cleanable.ratio",
		"log.cleaner.min.compaction.lag.ms")
	want := map[string]string{
		"log.cleanup.policy":                "compact,delete STATIC_BROKER_CONFIG",
		"log.cleaner.delete.retention.ms":   "1000 STATIC_BROKER_CONFIG",
		"log.cleaner.min.cleanable.ratio":   "0.25 STATIC_BROKER_CONFIG",
		"log.cleaner.min.compaction.lag.ms": "0 DEFAULT_CONFIG",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("broker configs %v, want %v", got, want)
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	topic, err := adm.DescribeTopicConfigs(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := topic.On("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	got = valueSources(tc, "cleanup.policy", "delete.retention.ms", "min.cleanable.dirty.ratio", "min.compaction.lag.ms")
	want = map[string]string{
		"cleanup.policy":            "compact,delete STATIC_BROKER_CONFIG",
		"delete.retention.ms":       "1000 STATIC_BROKER_CONFIG",
		"min.cleanable.dirty.ratio": "0.25 STATIC_BROKER_CONFIG",
		"min.compaction.lag.ms":     "0 DEFAULT_CONFIG",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("topic configs %v, want %v", got, want)
	}
}

// valueSources is "value SOURCE" of each config named.
func valueSources(rc kadm.ResourceConfig, names ...string) map[string]string {
	out := map[string]string{}
	for _, c := range rc.Configs {
		if slices.Contains(names, c.Key) {
			out[c.Key] = c.MaybeValue() + " " + c.Source.String()
		}
	}
	return out
}
