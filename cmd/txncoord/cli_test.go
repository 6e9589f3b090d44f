package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/datadriven"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
)

// These tests run the CLI in-process (run, as main does) against an admin
// API served from memory and, for the commands that read the leaders, a
// franz-go kfake cluster standing in for them: no txncoord node is started.

// fakeAdminBackend is an admin.Backend over a fixed list of transactions.
type fakeAdminBackend struct {
	mu      sync.Mutex
	txns    []admin.Txn
	leaders []markersender.LeaderStatus
	groups  []admin.GroupDetail
}

func (f *fakeAdminBackend) Transactions(lf admin.ListFilter) []admin.Txn {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []admin.Txn
	for _, t := range f.txns {
		if lf.State == "" || t.State == lf.State {
			out = append(out, t)
		}
	}
	return out
}

func (f *fakeAdminBackend) find(id string) (int, error) {
	for i, t := range f.txns {
		if t.TransactionalID == id {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: %q", admin.ErrNotFound, id)
}

func (f *fakeAdminBackend) Transaction(id string) (admin.Txn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, err := f.find(id)
	if err != nil {
		return admin.Txn{}, err
	}
	return f.txns[i], nil
}

func (f *fakeAdminBackend) Abort(_ context.Context, id string, force bool) (admin.Txn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, err := f.find(id)
	if err != nil {
		return admin.Txn{}, err
	}
	if force && strings.HasPrefix(f.txns[i].State, "Prepare") {
		f.txns[i].State = "Complete" + strings.TrimPrefix(f.txns[i].State, "Prepare")
		f.txns[i].GaveUp = []txncore.TopicPartition{{Topic: "orders", Partition: 1}}
		return f.txns[i], nil
	}
	if f.txns[i].State != "Ongoing" {
		return f.txns[i], fmt.Errorf("%w: %s is %s, not Ongoing", admin.ErrConflict, id, f.txns[i].State)
	}
	f.txns[i].State = "PrepareAbort"
	return f.txns[i], nil
}

func (f *fakeAdminBackend) Groups(context.Context) ([]admin.GroupSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []admin.GroupSummary
	for _, g := range f.groups {
		out = append(out, g.GroupSummary)
	}
	return out, nil
}

func (f *fakeAdminBackend) Group(_ context.Context, id string) (admin.GroupDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		if g.Group == id {
			return g, nil
		}
	}
	return admin.GroupDetail{}, fmt.Errorf("%w: %q", admin.ErrGroupNotFound, id)
}

func (f *fakeAdminBackend) DeleteGroup(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, g := range f.groups {
		if g.Group != id {
			continue
		}
		if g.MemberCount > 0 {
			return fmt.Errorf("%w: group %q has %d members (NON_EMPTY_GROUP)", admin.ErrConflict, id, g.MemberCount)
		}
		f.groups = append(f.groups[:i], f.groups[i+1:]...)
		return nil
	}
	return fmt.Errorf("%w: %q", admin.ErrGroupNotFound, id)
}

func (f *fakeAdminBackend) RetryMarkers(id string) (admin.Txn, error) { return f.Transaction(id) }
func (f *fakeAdminBackend) Leaders() []markersender.LeaderStatus      { return f.leaders }
func (f *fakeAdminBackend) Markers() []markersender.PendingTxn        { return nil }
func (f *fakeAdminBackend) Ready() error                              { return nil }

// startFakeAdmin serves b's admin API (with a bearer token when token is
// set) and returns its URL.
func startFakeAdmin(t *testing.T, b admin.Backend, token string) string {
	t.Helper()
	s, err := admin.Start("127.0.0.1:0", b, prometheus.NewRegistry(), admin.Auth{Token: token}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s.URL()
}

// fakeLeaders starts a one-broker kfake cluster with topic orders (3
// partitions) and returns it as the admin API lists leaders.
func fakeLeaders(t *testing.T) []markersender.LeaderStatus {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return []markersender.LeaderStatus{{NodeID: 0, Addr: kc.ListenAddrs()[0], KafkaVersion: "4.2", Connected: true}}
}

// runInProc runs the CLI as main does and returns stdout, stderr and the
// exit code. `txn abort` reads its answer from a file that is not a
// terminal, as under CI.
func runInProc(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	old := confirmInput
	confirmInput = devNull
	defer func() { confirmInput = old }()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"txncoord"}, args...), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// TestCLIMessages replays testdata/cli_messages.txt: for each command line
// its exit code and its output. Whatever the file says, a failing command
// prints exactly one line on stderr, "txncoord: ...", and no stack trace.
// go test ./cmd/txncoord -run TestCLIMessages -args -rewrite refreshes it.
func TestCLIMessages(t *testing.T) {
	b := &fakeAdminBackend{
		txns: []admin.Txn{
			{TransactionalID: "open-1", ProducerID: 7, ProducerEpoch: 1, State: "Ongoing", TransactionVersion: 2},
			{TransactionalID: "open-2", ProducerID: 8, ProducerEpoch: 0, State: "Ongoing", TransactionVersion: 2},
			{TransactionalID: "done-1", ProducerID: 9, ProducerEpoch: 3, State: "CompleteCommit", TransactionVersion: 2},
			{TransactionalID: "stuck-1", ProducerID: 10, ProducerEpoch: 2, State: "PrepareCommit", TransactionVersion: 2,
				Partitions:     []txncore.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}},
				PendingOffsets: []admin.PendingOffset{{Group: "etl", Topic: "input", Partition: 0, Offset: 12, ProducerID: 10, ProducerEpoch: 2}}},
		},
		groups:  fakeGroups(),
		leaders: fakeLeaders(t),
	}
	adminURL := startFakeAdmin(t, b, "")
	securedURL := startFakeAdmin(t, b, "s3cret")
	datadriven.RunFile(t, "testdata/cli_messages.txt", func(t *testing.T, c *datadriven.Case) string {
		fields := strings.Fields(c.Line)
		if fields[0] != "txncoord" {
			t.Fatalf("%s: a case starts with txncoord", c.Pos)
		}
		args := fields[1:]
		for i, a := range args {
			args[i] = strings.NewReplacer("SECURED_ADMIN", securedURL, "ADMIN", adminURL).Replace(a)
		}
		stdout, stderr, code := runInProc(t, args...)
		errLines := lines(stderr)
		if code != 0 && (len(errLines) != 1 || !strings.HasPrefix(errLines[0], "txncoord: ")) {
			t.Errorf("%s: exit %d with stderr %q, want one line \"txncoord: ...\"", c.Pos, code, stderr)
		}
		if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
			t.Errorf("%s: stack trace on stderr: %s", c.Pos, stderr)
		}
		out := []string{fmt.Sprintf("exit %d", code)}
		for _, l := range lines(stdout) {
			out = append(out, strings.TrimSpace("stdout: "+l))
		}
		for _, l := range errLines {
			out = append(out, strings.TrimSpace("stderr: "+l))
		}
		return strings.Join(out, "\n")
	})
}

func lines(s string) []string {
	if s = strings.TrimRight(s, "\n"); s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// An id longer than Kafka can store is refused before any request.
func TestTransactionalIDTooLong(t *testing.T) {
	long := strings.Repeat("x", cluster.MaxTransactionalIDBytes+1)
	_, stderr, code := runInProc(t, "txn", "describe", "--transactional-id", long, "--admin", "http://127.0.0.1:1")
	want := fmt.Sprintf("txncoord: --transactional-id is %d bytes long; Kafka allows at most %d\n", len(long), cluster.MaxTransactionalIDBytes)
	if code != 2 || stderr != want {
		t.Fatalf("exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"help", "up"}, {"help", "txn"}, {"txn", "help", "list"}, {"--help"}, {"txn", "list", "--help"}} {
		stdout, stderr, code := runInProc(t, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "USAGE:") {
			t.Errorf("txncoord %v: exit %d, stderr %q, stdout %q", args, code, stderr, stdout)
		}
	}
	stdout, _, _ := runInProc(t, "help", "txn", "abort")
	if !strings.Contains(stdout, "txncoord txn abort") || !strings.Contains(stdout, "--yes") {
		t.Errorf("help txn abort does not describe txn abort: %s", stdout)
	}
}

// The log flags work before the command, after it, and from the
// environment; after the command wins over before it and over the
// environment.
func TestLogFlagsAnywhere(t *testing.T) {
	defer func() { logger = zerolog.Nop() }()
	cases := []struct {
		env  string
		args []string
		want zerolog.Level
	}{
		{"", []string{"version"}, zerolog.InfoLevel},
		{"", []string{"--log-level", "warn", "version"}, zerolog.WarnLevel},
		{"", []string{"version", "--log-level", "debug"}, zerolog.DebugLevel},
		{"", []string{"--log-level", "warn", "version", "--log-level", "error"}, zerolog.ErrorLevel},
		{"error", []string{"version"}, zerolog.ErrorLevel},
		{"error", []string{"version", "--log-level", "debug"}, zerolog.DebugLevel},
		{"", []string{"txn", "list", "--log-level", "debug", "--admin", "http://127.0.0.1:1", "-o", "yaml"}, zerolog.DebugLevel},
	}
	for _, tc := range cases {
		t.Setenv("TXNCOORD_LOG_LEVEL", tc.env)
		if tc.env == "" {
			os.Unsetenv("TXNCOORD_LOG_LEVEL")
		}
		logger = zerolog.Nop()
		runInProc(t, tc.args...)
		if got := logger.GetLevel(); got != tc.want {
			t.Errorf("TXNCOORD_LOG_LEVEL=%q txncoord %v: level %v, want %v", tc.env, tc.args, got, tc.want)
		}
	}
}

// TestTxnListLongIDs is issue 18's measurement: 10,000 transactions, one
// with a 30,000-byte id. The table once padded every row to that id's
// width (30,060 characters a row, not done after 60 s); now the id is cut,
// nothing else is padded for it, and the table is written in well under
// the bound even with the race detector on a busy 2-core machine.
func TestTxnListLongIDs(t *testing.T) {
	const n = 10_000
	longID := "long-" + strings.Repeat("x", 30_000-len("long-")-len("-end")) + "-end"
	b := &fakeAdminBackend{}
	b.txns = append(b.txns, admin.Txn{TransactionalID: longID, ProducerID: 1, State: "Ongoing", TransactionVersion: 2})
	for i := 1; i < n; i++ {
		b.txns = append(b.txns, admin.Txn{TransactionalID: fmt.Sprintf("orders-app-%05d", i), ProducerID: int64(i + 1), State: "CompleteCommit", TransactionVersion: 2})
	}
	url := startFakeAdmin(t, b, "")

	start := time.Now()
	stdout, stderr, code := runInProc(t, "txn", "list", "--admin", url)
	elapsed := time.Since(start)
	if code != 0 || stderr != "" {
		t.Fatalf("txn list: exit %d: %s", code, stderr)
	}
	rows := lines(stdout)
	if len(rows) != n+1 {
		t.Fatalf("%d lines, want a header and %d rows", len(rows), n)
	}
	widest := 0
	for _, r := range rows {
		widest = max(widest, utf8.RuneCountInString(r))
	}
	t.Logf("txn list, %d rows, one id of %d bytes: %v, %d bytes of output, widest line %d", n, len(longID), elapsed, len(stdout), widest)
	if !strings.HasPrefix(rows[1], "long-xxx") || !strings.Contains(rows[1], "…") || !strings.Contains(rows[1], "x-end") {
		t.Errorf("the long id's row does not show both of its ends: %q", rows[1])
	}
	if widest > 150 {
		t.Errorf("widest line %d characters: the long id pads the table", widest)
	}

	// --wide prints the whole id, in its own row only.
	start = time.Now()
	stdout, _, code = runInProc(t, "txn", "list", "--wide", "--admin", url)
	elapsed = time.Since(start)
	rows = lines(stdout)
	if code != 0 || len(rows) != n+1 || !strings.HasPrefix(rows[1], longID+"  ") {
		t.Fatalf("txn list --wide: exit %d, %d lines, first row %.80q", code, len(rows), rows[1])
	}
	for _, r := range append([]string{rows[0]}, rows[2:]...) {
		if len(r) > 150 {
			t.Fatalf("txn list --wide pads other rows for the long id: %d characters", len(r))
		}
	}
	t.Logf("txn list --wide: %v, %d bytes of output", elapsed, len(stdout))
}

func TestTableCells(t *testing.T) {
	tb := &table{}
	cases := []struct{ in, want string }{
		{"orders-app-1", "orders-app-1"},
		{strings.Repeat("a", maxCellWidth), strings.Repeat("a", maxCellWidth)},
		{strings.Repeat("a", 50) + strings.Repeat("b", 50), strings.Repeat("a", 42) + "…" + strings.Repeat("b", 21)},
		{"tab\there\nnewline", `tab\there\nnewline`},
		{"bad\xffbyte", `bad\xffbyte`},
		{strings.Repeat("é", 100), strings.Repeat("é", 42) + "…" + strings.Repeat("é", 21)},
	}
	for _, tc := range cases {
		got := tb.cell(tc.in)
		if got != tc.want {
			t.Errorf("cell(%.40q) = %q, want %q", tc.in, got, tc.want)
		}
		if n := utf8.RuneCountInString(got); n > maxCellWidth {
			t.Errorf("cell(%.40q): %d runes, more than %d", tc.in, n, maxCellWidth)
		}
	}
	if got := tb.cell(strings.Repeat("\x00", 100)); utf8.RuneCountInString(got) > maxCellWidth || strings.ContainsRune(got, 0) {
		t.Errorf("escaped control characters: %q", got)
	}
}

// The widths are set by the header and the first tableWindow rows, which
// are held until then; later rows are written as they come, with those
// widths.
func TestTableStreams(t *testing.T) {
	var out bytes.Buffer
	tb := newTable(&out, false, "Id", "State")
	for i := range tableWindow - 1 {
		tb.Row(fmt.Sprintf("id-%d", i), "Ongoing")
	}
	if out.Len() != 0 {
		t.Fatalf("wrote %d bytes before the window was full", out.Len())
	}
	tb.Row("id-x", "Ongoing") // fills the window: written (past bufio's buffer)
	if out.Len() == 0 {
		t.Fatal("nothing written once the window was full")
	}
	tb.Row(strings.Repeat("y", 30), "Ongoing")
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	rows := lines(out.String())
	if len(rows) != tableWindow+2 || rows[0] != "Id      State" || rows[1] != "id-0    Ongoing" {
		t.Fatalf("%d rows, header %q, first %q", len(rows), rows[0], rows[1])
	}
	if last := rows[len(rows)-1]; last != strings.Repeat("y", 30)+"  Ongoing" {
		t.Fatalf("a row after the window: %q", last)
	}
	if slices.ContainsFunc(rows, func(r string) bool { return strings.HasSuffix(r, " ") }) {
		t.Fatal("trailing blanks")
	}
}

// fakeGroups are the groups of TestCLIMessages: etl, Stable with one
// member and a pending transactional offset (lag filled by admin.Lag, as
// the node does), old, Empty, and queue, a share group with one member.
func fakeGroups() []admin.GroupDetail {
	etl := admin.GroupDetail{
		GroupSummary: admin.GroupSummary{Group: "etl", Type: "classic", State: "Stable", ProtocolType: "consumer", Protocol: "cooperative-sticky",
			Generation: 3, MemberCount: 1, OffsetsPartition: 17},
		Leader: "kgo-1",
		Members: []admin.GroupMember{{MemberID: "kgo-1", ClientID: "etl-stage-1", Host: "/127.0.0.1",
			Assignment: []admin.TopicPartition{{Topic: "input", Partition: 0}, {Topic: "input", Partition: 1}}}},
		Offsets: []admin.GroupOffset{{Topic: "input", Partition: 0, CurrentOffset: 10}},
		Pending: []admin.PendingOffset{{Group: "etl", Topic: "input", Partition: 0, Offset: 12, ProducerID: 10, ProducerEpoch: 2}},
	}
	admin.Lag(&etl, map[admin.TopicPartition]int64{{Topic: "input", Partition: 0}: 15, {Topic: "input", Partition: 1}: 4})
	old := admin.GroupDetail{GroupSummary: admin.GroupSummary{Group: "old", Type: "classic", State: "Empty", ProtocolType: "consumer"},
		Members: []admin.GroupMember{}, Offsets: []admin.GroupOffset{{Topic: "input", Partition: 1, CurrentOffset: 2, LogEndOffset: 4, Lag: 2}}}
	queue := admin.GroupDetail{GroupSummary: admin.GroupSummary{Group: "queue", Type: "share", State: "Stable", ProtocolType: "share",
		Protocol: "simple", Generation: 4, MemberCount: 1, OffsetsPartition: -1},
		Members: []admin.GroupMember{{MemberID: "m-1", ClientID: "worker", Host: "/127.0.0.1",
			Assignment: []admin.TopicPartition{{Topic: "jobs", Partition: 0}}}},
		Offsets: []admin.GroupOffset{}, Pending: []admin.PendingOffset{},
		SharePartitions: []admin.SharePartition{{Topic: "jobs", Partition: 0, StartOffset: 40, EndOffset: 100, Lag: 60, Acquired: 25, Available: 3}}}
	return []admin.GroupDetail{etl, old, queue}
}
