package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// kgoDir is pkg/kgo of the franz-go in go.mod, from the module cache.
func kgoDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/twmb/franz-go: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "pkg", "kgo")
}

// The broker tests of franz-go v1.22.3 are the 36 that issue 17 counts:
// the five share-group tests among them, the unit tests (which never dial)
// not.
func TestDiscoverKgo(t *testing.T) {
	tests, err := discoverBrokerTests(kgoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != 36 {
		t.Errorf("found %d broker tests, want 36: %v", len(tests), tests)
	}
	for _, want := range []string{"TestTxnEtl", "TestGroupETL", "TestPing", "TestIssue325", "TestUnknownGroupOffsetFetchPinned"} {
		if !slices.Contains(tests, want) {
			t.Errorf("%s missing from %v", want, tests)
		}
	}
	for share := range shareGroupTests {
		if !slices.Contains(tests, share) {
			t.Errorf("share-group test %s is not a broker test of this franz-go", share)
		}
	}
	// Unit tests of pkg/kgo that never dial a broker.
	for _, unit := range []string{"TestRecordFormatter", "TestRecordFormatterUnpack"} {
		if slices.Contains(tests, unit) {
			t.Errorf("%s is not a broker test", unit)
		}
	}
	for test := range expectedFailures {
		if !slices.Contains(tests, test) {
			t.Errorf("expectedFailures lists %s, not a broker test", test)
		}
	}
}

// A test reaches KGO_SEEDS through helpers, a t.Run closure, or a helper
// passed as a value; a test that calls none of them is not a broker test.
func TestDiscoverReachability(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import "testing"

func getSeedBrokers() string { return "" }
func newTestClient() string  { return getSeedBrokers() }
func adm() string            { return newTestClient() }
func helper(t *testing.T)    { adm() }

func TestDirect(t *testing.T)  { getSeedBrokers() }
func TestChain(t *testing.T)   { adm() }
func TestClosure(t *testing.T) { t.Run("a", func(t *testing.T) { newTestClient() }) }
func TestValue(t *testing.T)   { t.Run("a", helper) }
func TestUnit(t *testing.T)    { _ = 1 + 1 }
`
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := discoverBrokerTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"TestChain", "TestClosure", "TestDirect", "TestValue"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	// Without the helper the layout is not the one this runner knows.
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package x\n\nfunc TestA() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := discoverBrokerTests(dir); err == nil {
		t.Error("no error for test files without getSeedBrokers")
	}
}

func TestClassify(t *testing.T) {
	exit1 := exec.Command("sh", "-c", "exit 1").Run()
	for _, c := range []struct {
		name       string
		out        string
		runErr     error
		killed     bool
		wantStatus string
		wantFirst  string
	}{
		{"pass", "=== RUN   TestPing\n--- PASS: TestPing (0.00s)\nPASS\n", nil, false, statusPass, ""},
		{"fail: first error line, helpers' logs skipped", `=== RUN   TestPing
    helpers_test.go:535: deleting topic abc
[12:00:00.000 1] INFO some client log
    txn_test.go:52: unable to create topic "x": BROKER_TOO_OLD
    txn_test.go:60: second error
--- FAIL: TestPing (0.01s)
FAIL
`, exit1, false, statusFail, `txn_test.go:52: unable to create topic "x": BROKER_TOO_OLD`},
		{"skip: its reason", "=== RUN   TestShareGroup\n    share_test.go:38: share groups not supported\n--- SKIP: TestShareGroup (0.00s)\nPASS\n",
			nil, false, statusSkip, "share_test.go:38: share groups not supported"},
		{"timeout", "=== RUN   TestTxnEtl\npanic: test timed out after 4m0s\n\trunning tests:\n\t\tTestTxnEtl (4m0s)\n", exit1, false,
			statusTimeout, "panic: test timed out after 4m0s"},
		{"killed by the backstop", "=== RUN   TestTxnEtl\n", nil, true, statusTimeout, "killed: no result 30 s past --timeout"},
		{"fail: a skipped subtest's line is not the failure", `=== RUN   TestPing
=== PAUSE TestPing
=== CONT  TestPing
=== RUN   TestPing/classic
=== PAUSE TestPing/classic
=== RUN   TestPing/848
=== PAUSE TestPing/848
=== CONT  TestPing/classic
=== CONT  TestPing/848
    consumer_test.go:1068: broker does not support KIP-848
=== NAME  TestPing/classic
    helpers_test.go:475: unable to create topic "x"
--- FAIL: TestPing (0.01s)
    --- SKIP: TestPing/848 (0.00s)
    --- FAIL: TestPing/classic (0.01s)
FAIL
`, exit1, false, statusFail, `helpers_test.go:475: unable to create topic "x"`},
		{"panic", "=== RUN   TestPing\npanic: runtime error: index out of range\n\ngoroutine 1 [running]:\n", exit1, false,
			statusFail, "panic: runtime error: index out of range"},
		{"a subtest's name is not the test's", "--- PASS: TestPing/sub (0.00s)\n", nil, false, statusError, "no such test in the kgo test binary"},
	} {
		t.Run(c.name, func(t *testing.T) {
			test := "TestPing"
			if strings.Contains(c.out, "TestShareGroup") {
				test = "TestShareGroup"
			} else if strings.Contains(c.out, "TestTxnEtl") {
				test = "TestTxnEtl"
			}
			status, first := classify(test, []byte(c.out), c.runErr, c.killed)
			if status != c.wantStatus || first != c.wantFirst {
				t.Errorf("got %q %q, want %q %q", status, first, c.wantStatus, c.wantFirst)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	saved := expectedFailures
	t.Cleanup(func() { expectedFailures = saved })
	expectedFailures = map[string]string{"TestListedFails": "no X", "TestListedPasses": "no Y", "TestGone": "no Z"}

	tests := []string{"TestListedFails", "TestListedPasses", "TestOK", "TestShareGroup", "TestUnlisted", "TestSkips", "TestNotRun"}
	got := map[string]result{
		"TestListedFails":  {status: statusTimeout},
		"TestListedPasses": {status: statusPass},
		"TestOK":           {status: statusPass},
		"TestShareGroup":   {status: statusSkip},
		"TestUnlisted":     {status: statusFail},
		"TestSkips":        {status: statusSkip},
	}
	v := judge(tests, got)
	if v.ok() {
		t.Error("verdict ok with unexpected failures")
	}
	// A share-group test that skips is a failure now that txncoord
	// serves share groups.
	for name, pair := range map[string][2][]string{
		"unexpected": {v.unexpected, {"TestShareGroup", "TestUnlisted", "TestSkips"}},
		"expected":   {v.expected, {"TestListedFails"}},
		"fixed":      {v.fixed, {"TestListedPasses"}},
		"stale":      {v.stale, {"TestGone"}},
	} {
		if !slices.Equal(pair[0], pair[1]) {
			t.Errorf("%s: got %v, want %v", name, pair[0], pair[1])
		}
	}

	delete(got, "TestUnlisted")
	delete(got, "TestSkips")
	got["TestShareGroup"] = result{status: statusPass}
	if v := judge(tests, got); !v.ok() {
		t.Errorf("verdict not ok with only expected failures: %v", v.unexpected)
	}
}

func TestReport(t *testing.T) {
	tests := []string{"TestA", "TestB"}
	results := map[string]map[string]result{
		"txncoord": {
			"TestA": {status: statusPass, elapsed: 1500 * time.Millisecond},
			"TestB": {status: statusFail, elapsed: time.Second, first: "x_test.go:1: " + strings.Repeat("y", 300)},
		},
		"kfake": {
			"TestA": {status: statusPass, elapsed: time.Second},
			"TestB": {status: statusPass, elapsed: 2 * time.Second},
		},
	}
	var buf bytes.Buffer
	report(&buf, tests, []string{"txncoord", "kfake"}, results, judge(tests, results["txncoord"]))
	out := buf.String()
	for _, want := range []string{
		"TEST", "TXNCOORD", "KFAKE",
		"txncoord: 1/2 passed, 0 skipped, 1 failed",
		"kfake:    2/2 passed, 0 skipped, 0 failed",
		"txncoord: x_test.go:1: yyy",
		"CONFORMANCE FAILED: 1 unexpected txncoord failure(s): TestB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for line := range strings.Lines(out) {
		if len(line) > 250 {
			t.Errorf("line of %d characters: the failure line is not cut", len(line))
		}
	}
}

func TestCauses(t *testing.T) {
	tests := []string{"TestA", "TestB", "TestC", "TestShareGroup"}
	results := map[string]map[string]result{
		"txncoord": {
			"TestA":          {status: statusFail, first: `helpers_test.go:475: unable to create topic "0123456789abcdef0123": broker is too old`},
			"TestB":          {status: statusFail, first: `helpers_test.go:480: unable to create topic "fedcba98765432100000": broker is too old`},
			"TestC":          {status: statusPass},
			"TestShareGroup": {status: statusPass},
		},
		"kfake": {
			"TestA": {status: statusPass, apis: apiSet{0: 13, 19: 7, 71: 0, 72: 0}},
			"TestB": {status: statusPass, apis: apiSet{0: 13, 11: 9, 19: 7}},
		},
	}
	var buf bytes.Buffer
	causes(&buf, tests, results, apiSet{0: 13, 18: 4})
	out := buf.String()
	for _, want := range []string{
		"   2  FAIL: unable to create topic \"<id>\": broker is too old\n      TestA TestB\n",
		"   1  CreateTopics(19)\n      TestA\n",
		"   1  JoinGroup(11) CreateTopics(19)\n      TestB\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("causes lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Telemetry") || strings.Contains(out, "TestShareGroup") || strings.Contains(out, "TestC") {
		t.Errorf("causes list optional APIs or a pass:\n%s", out)
	}
}

func TestAPISetFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apis.txt")
	s := apiSet{}
	s.add(19, 5)
	s.add(19, 7)
	s.add(19, 6)
	s.add(0, 13)
	if err := s.write(path); err != nil {
		t.Fatal(err)
	}
	got, err := readAPISet(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[19] != 7 || got[0] != 13 {
		t.Errorf("read back %v, want 0:13 19:7", got)
	}
}
