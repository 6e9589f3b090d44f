package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
)

// envWithout is the test's environment without any TXNCOORD_ variable, so
// that what a test sets is all the command sees.
func envWithout() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TXNCOORD_") {
			out = append(out, kv)
		}
	}
	return out
}

// runCLIEnv runs the command with extra environment variables (and no
// inherited TXNCOORD_ ones) and returns stdout, stderr and the exit code.
func runCLIEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, txncoordBinary(t), args...)
	cmd.Env = append(envWithout(), env...)
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

// loggedUp is a running `txncoord up` whose stderr can be read while it
// runs.
type loggedUp struct {
	*upProcess
	lw *lockedWriter
}

// logs is what the process has written to stderr so far.
func (p *loggedUp) logs() string {
	p.lw.mu.Lock()
	defer p.lw.mu.Unlock()
	return p.stderr.String()
}

// startUpEnv runs `txncoord up` with the given arguments and environment
// (and no inherited TXNCOORD_ variables) until its ready line; it is killed
// when the test ends. stderr collects everything the process logs.
func startUpEnv(t *testing.T, env []string, args ...string) *loggedUp {
	t.Helper()
	cmd := exec.Command(txncoordBinary(t), append([]string{"up"}, args...)...)
	cmd.Env = append(envWithout(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &upProcess{cmd: cmd, stderr: &strings.Builder{}, done: make(chan error, 1)}
	lw := &lockedWriter{w: p.stderr}
	cmd.Stderr = lw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			ready <- sc.Text()
		}
		close(ready)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-ready:
		if !ok || !strings.HasPrefix(line, "txncoord ready ") {
			t.Fatalf("txncoord up: no ready line (first line %q): %s", line, (&loggedUp{p, lw}).logs())
		}
		for _, tok := range strings.Fields(strings.TrimPrefix(line, "txncoord ready ")) {
			k, v, _ := strings.Cut(tok, "=")
			switch k {
			case "bootstrap":
				p.bootstrap = v
			case "admin":
				p.adminURL = v
			}
		}
	case <-time.After(60 * time.Second):
		t.Fatal("txncoord up not ready in 60 s")
	}
	return &loggedUp{upProcess: p, lw: lw}
}

// httpGet returns the status and body of GET url, with a bearer token when
// token is not empty.
func httpGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// envName is the README's rule: TXNCOORD_ and the flag's name in upper
// snake case.
func envName(flag string) string {
	return "TXNCOORD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// TestEveryFlagHasItsEnvVar walks every command of the CLI: each flag must
// be settable as TXNCOORD_<FLAG> (README, CLI: "Every flag can also be set
// from the environment"). --token is documented as TXNCOORD_ADMIN_TOKEN. A
// command's flag that repeats a global one (--log-level after the command)
// may leave the variable to the global flag.
func TestEveryFlagHasItsEnvVar(t *testing.T) {
	documented := map[string]string{"token": "TXNCOORD_ADMIN_TOKEN"}
	type envFlag interface{ GetEnvVars() []string }
	envOf := func(f cli.Flag) []string {
		if ef, ok := f.(envFlag); ok {
			return ef.GetEnvVars()
		}
		return nil
	}
	app := newApp()
	global := map[string][]string{}
	for _, f := range app.Flags {
		global[f.Names()[0]] = envOf(f)
	}
	var walk func(path string, flags []cli.Flag, cmds []*cli.Command)
	checked := 0
	walk = func(path string, flags []cli.Flag, cmds []*cli.Command) {
		for _, f := range flags {
			name := f.Names()[0]
			want := envName(name)
			if d, ok := documented[name]; ok {
				want = d
			}
			got := envOf(f)
			if len(got) == 0 && path != "txncoord" {
				got = global[name]
			}
			found := false
			for _, e := range got {
				found = found || e == want
			}
			if !found {
				t.Errorf("%s --%s: environment variables %q, want %s", path, name, got, want)
			}
			checked++
		}
		for _, c := range cmds {
			walk(path+" "+c.Name, c.Flags, c.Subcommands)
		}
	}
	walk("txncoord", app.Flags, app.Commands)
	if checked < 30 {
		t.Fatalf("only %d flags found: the walk missed commands", checked)
	}
}

// TestEnvOnlyUpAndAdmin runs `txncoord up` with nothing on its command
// line but settings in TXNCOORD_ variables (data dir, addresses, leaders,
// topics, --secure) and observes their effect; then admin commands with
// only TXNCOORD_ADMIN, TXNCOORD_ADMIN_TOKEN and TXNCOORD_OUTPUT set: the
// token from the environment is what gets them past the secure admin API.
func TestEnvOnlyUpAndAdmin(t *testing.T) {
	base := freePortRun(t, 4)
	dataDir := filepath.Join(t.TempDir(), "from-env")
	listen := fmt.Sprintf("127.0.0.1:%d", base)
	adminAddr := fmt.Sprintf("127.0.0.1:%d", base+3)
	up := startUpEnv(t, []string{
		"TXNCOORD_DATA_DIR=" + dataDir, "TXNCOORD_LISTEN=" + listen, "TXNCOORD_ADMIN_LISTEN=" + adminAddr,
		"TXNCOORD_LEADERS=4.2,4.1", "TXNCOORD_TOPICS=envtopic:5", "TXNCOORD_SECURE=true",
	})
	if up.bootstrap != listen || up.adminURL != "http://"+adminAddr {
		t.Fatalf("ready line bootstrap=%s admin=%s, want %s and http://%s from the environment", up.bootstrap, up.adminURL, listen, adminAddr)
	}
	for _, name := range []string{"cluster.yaml", "txncoord.db", "security/admin.token", "security/ca.crt"} {
		if _, err := os.Stat(filepath.Join(dataDir, name)); err != nil {
			t.Fatalf("TXNCOORD_DATA_DIR / TXNCOORD_SECURE: %v", err)
		}
	}
	clusterYAML, err := os.ReadFile(filepath.Join(dataDir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(clusterYAML); !strings.Contains(s, "envtopic") || strings.Count(s, "kafka_version") != 3 || !strings.Contains(s, `"4.1"`) {
		t.Fatalf("cluster.yaml does not reflect TXNCOORD_TOPICS / TXNCOORD_LEADERS:\n%s", s)
	}
	tokenBytes, err := os.ReadFile(filepath.Join(dataDir, "security", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))

	adminEnv := []string{"TXNCOORD_ADMIN=" + up.adminURL, "TXNCOORD_OUTPUT=json"}
	stdout, stderr, code := runCLIEnv(t, append(adminEnv, "TXNCOORD_ADMIN_TOKEN="+token), "leaders")
	if code != 0 {
		t.Fatalf("leaders with TXNCOORD_ADMIN_TOKEN: exit %d: %s", code, stderr)
	}
	var leaders []map[string]any
	if err := json.Unmarshal([]byte(stdout), &leaders); err != nil || len(leaders) != 2 {
		t.Fatalf("leaders with TXNCOORD_OUTPUT=json: %v: %q", err, stdout)
	}
	if _, stderr, code := runCLIEnv(t, adminEnv, "leaders"); code != 1 || !strings.Contains(stderr, "401") {
		t.Fatalf("leaders without TXNCOORD_ADMIN_TOKEN: exit %d: %s (want 1 and HTTP 401)", code, stderr)
	}
	// TXNCOORD_TRANSACTIONAL_ID stands for --transactional-id.
	_, stderr, code = runCLIEnv(t, append(adminEnv, "TXNCOORD_ADMIN_TOKEN="+token, "TXNCOORD_TRANSACTIONAL_ID=env-id"), "txn", "describe")
	if code != 1 || !strings.Contains(stderr, "env-id") || !strings.Contains(stderr, "404") {
		t.Fatalf("txn describe with TXNCOORD_TRANSACTIONAL_ID=env-id: exit %d: %s (want 1, 404 for env-id)", code, stderr)
	}
	up.stop(t)
}

// TestHealthAndReadyOpenWhenSecure: with `up --secure`, /healthz and
// /readyz answer 200 without a token (probes carry none), while the
// transactions API answers 401 without it and 200 with it.
func TestHealthAndReadyOpenWhenSecure(t *testing.T) {
	base := freePortRun(t, 3)
	dataDir := t.TempDir()
	up := startUp(t, "--secure", "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+2))
	tokenBytes, err := os.ReadFile(filepath.Join(dataDir, "security", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, up.adminURL+path, ""); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s, want 200", path, code, body)
		}
	}
	if code, body := httpGet(t, up.adminURL+"/v1/transactions", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/transactions without a token: %d %s, want 401", code, body)
	}
	if code, body := httpGet(t, up.adminURL+"/v1/transactions", "not-"+token); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/transactions with a wrong token: %d %s, want 401", code, body)
	}
	if code, body := httpGet(t, up.adminURL+"/v1/transactions", token); code != http.StatusOK {
		t.Errorf("GET /v1/transactions with the token: %d %s, want 200", code, body)
	}
	up.stop(t)
}

// TestStuckMetricAndOneLogLine: `up --marker-version-discovery=false` with
// a 4.1 leader (Kafka 4.2.0's bug): a committed transaction's marker to
// the 4.1 leader can never be written. The admin API's /metrics exports
// txncoord_marker_stuck_transactions 1, and the process logs the stuck
// transaction in exactly one line, with its id and the reason.
func TestStuckMetricAndOneLogLine(t *testing.T) {
	base := freePortRun(t, 4)
	up := startUpEnv(t, []string{"TXNCOORD_LOG_FORMAT=json"}, "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.1", "--topics", "orders:4", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3),
		"--marker-version-discovery=false")
	gauge := func() string {
		t.Helper()
		code, body := httpGet(t, up.adminURL+"/metrics", "")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d", code)
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "txncoord_marker_stuck_transactions "); ok {
				return v
			}
		}
		t.Fatal("/metrics has no txncoord_marker_stuck_transactions sample")
		return ""
	}
	if g := gauge(); g != "0" {
		t.Fatalf("txncoord_marker_stuck_transactions = %s before any transaction, want 0", g)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.TransactionalID("stuck-app"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 4; p++ { // partitions on both leaders
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); gauge() != "1"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("txncoord_marker_stuck_transactions never reached 1 (is %s)", gauge())
		}
	}
	var described admin.Txn
	cliJSON(t, &described, "txn", "describe", "--transactional-id", "stuck-app", "--admin", up.adminURL, "-o", "json")
	if described.State != "PrepareCommit" || described.StuckReason == "" {
		t.Fatalf("txn describe of the stuck transaction: %+v", described)
	}
	// `status` shows it on its one screen, with the reason.
	var st clusterStatus
	cliJSON(t, &st, "status", "--admin", up.adminURL, "-o", "json")
	if len(st.Stuck) != 1 || st.Stuck[0].TransactionalID != "stuck-app" || st.Transactions["PrepareCommit"] != 1 || len(st.Leaders) != 2 {
		t.Fatalf("status: %+v", st)
	}
	screen, _, code := runCLI(t, "status", "--admin", up.adminURL)
	if code != 0 || !strings.Contains(screen, "1 stuck") || !strings.Contains(screen, "stuck-app (COMMIT): ") || !strings.Contains(screen, "PrepareCommit=1") {
		t.Fatalf("status: exit %d:\n%s", code, screen)
	}
	time.Sleep(500 * time.Millisecond) // a second line, if any, has been written by now

	logs := up.logs()
	var stuckLines []string
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		msg, _ := rec["message"].(string)
		if rec["txn_id"] == "stuck-app" && strings.Contains(msg, "stuck") {
			stuckLines = append(stuckLines, line)
		}
	}
	if len(stuckLines) != 1 {
		t.Fatalf("%d log lines report stuck-app stuck, want exactly one:\n%s", len(stuckLines), strings.Join(stuckLines, "\n"))
	}
	var rec map[string]any
	json.Unmarshal([]byte(stuckLines[0]), &rec)
	if reason, _ := rec["reason"].(string); !strings.Contains(reason, "v2") || !strings.Contains(reason, "discovery is off") {
		t.Fatalf("the stuck line does not give the reason: %s", stuckLines[0])
	}
	if lvl := rec["level"]; lvl != "error" && lvl != "warn" {
		t.Fatalf("the stuck line is logged at %v, want warn or error: %s", lvl, stuckLines[0])
	}
	up.cmd.Process.Signal(syscall.SIGTERM)
	<-up.done
}

// TestCLIErrorsAreOneLine: a failing command writes exactly one line to
// stderr, "txncoord: <what went wrong>", and nothing to stdout, for runtime
// errors (an unknown transactional id, an unreachable admin API) and usage
// errors (bad flag values, unknown flags and commands).
func TestCLIErrorsAreOneLine(t *testing.T) {
	base := freePortRun(t, 3)
	up := startUp(t, "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+2))
	// A cluster file with two problems.
	badCluster := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badCluster, []byte("coordinator: {node_id: 1, addr: 127.0.0.1:1, kafka_version: \"9.9\"}\n"+
		"leaders:\n  - {node_id: 1, addr: 127.0.0.1:2, kafka_version: \"4.2\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown id", []string{"txn", "describe", "--transactional-id", "no-such-id", "--admin", up.adminURL}, 1, "no-such-id"},
		{"unknown id, retry-markers", []string{"txn", "retry-markers", "--transactional-id", "no-such-id", "--admin", up.adminURL}, 1, "no-such-id"},
		{"unknown id, abort", []string{"txn", "abort", "--transactional-id", "no-such-id", "--yes", "--admin", up.adminURL}, 1, "no-such-id"},
		{"unreachable admin", []string{"markers", "--admin", "http://127.0.0.1:1"}, 1, "unreachable"},
		{"bad duration", []string{"txn", "list", "--duration-filter", "soon", "--admin", up.adminURL}, 2, "soon"},
		{"bad int", []string{"producers", "--topic", "t", "--partition", "first", "--admin", up.adminURL}, 2, "first"},
		{"bad output format", []string{"leaders", "-o", "yaml", "--admin", up.adminURL}, 2, "yaml"},
		{"bad log level", []string{"--log-level", "loud", "leaders", "--admin", up.adminURL}, 2, "loud"},
		{"bad leader version", []string{"up", "--leaders", "4.2,5.0", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:1"}, 2, "5.0"},
		{"bad topics", []string{"up", "--topics", "orders:zero", "--data-dir", t.TempDir()}, 2, "orders:zero"},
		{"bad cluster file", []string{"coordinator", "--cluster", badCluster, "--data-dir", t.TempDir()}, 2, "9.9"},
		{"bad admin URL", []string{"txn", "list", "--admin", "http://[::1"}, 2, "[::1"},
		{"bad bool", []string{"up", "--secure=maybe", "--data-dir", t.TempDir()}, 2, "maybe"},
		{"unknown flag", []string{"txn", "list", "--no-such-flag"}, 2, "no-such-flag"},
		{"unknown command", []string{"frobnicate"}, 2, "frobnicate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLIEnv(t, nil, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || !strings.HasPrefix(stderr, "txncoord: ") {
				t.Errorf("stderr is not one line \"txncoord: ...\": %q", stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not name %q: %q", tc.want, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout not empty on error: %q", stdout)
			}
		})
	}
	up.stop(t)
}
