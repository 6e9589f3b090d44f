package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Outcomes of one test against one target.
const (
	statusPass    = "pass"
	statusFail    = "FAIL"
	statusSkip    = "skip"
	statusTimeout = "TIMEOUT" // the test ran past --timeout
	statusError   = "ERROR"   // the server did not start: no test ran
)

type result struct {
	status  string
	elapsed time.Duration
	// first is the first line of the output that says why the test failed
	// or skipped (empty for a pass).
	first string
	dir   string // where its test.log and server.log are
	// apis are the API keys the test asked of the server (kfake only).
	apis apiSet
}

// suite is how to run one kgo test.
type suite struct {
	testBin string
	kgoDir  string
	timeout time.Duration
	records int

	// served is the ApiVersions of the first txncoord started.
	servedOnce sync.Once
	served     apiSet
}

// run runs test against a fresh server of t, with its logs in dir.
func (su *suite) run(t target, test, dir string) result {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{status: statusError, first: err.Error(), dir: dir}
	}
	srv, err := startServer(t, dir)
	if err != nil {
		return result{status: statusError, first: err.Error(), dir: dir}
	}
	defer srv.stop()
	if t.name == "txncoord" {
		su.servedOnce.Do(func() {
			var err error
			if su.served, err = advertisedAPIs(srv.bootstrap); err != nil {
				fmt.Fprintf(os.Stderr, "conformance: txncoord's ApiVersions: %v\n", err)
			}
		})
	}

	logPath := filepath.Join(dir, "test.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return result{status: statusError, first: err.Error(), dir: dir}
	}
	defer logFile.Close()
	// -test.timeout makes the test binary print every goroutine and name
	// the stuck test; the context is a backstop for a binary that cannot
	// even do that.
	ctx, cancel := context.WithTimeout(context.Background(), su.timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, su.testBin,
		"-test.run", "^"+regexp.QuoteMeta(test)+"$",
		"-test.count", "1",
		"-test.v",
		"-test.timeout", su.timeout.String(),
	)
	// The package's directory, as `go test` would run it (the module cache
	// is read-only; kgo's tests write nothing there).
	cmd.Dir = su.kgoDir
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+srv.bootstrap,
		"KGO_TEST_RF=1",
		"KGO_TEST_RECORDS="+strconv.Itoa(su.records),
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	runErr := cmd.Run()
	elapsed := time.Since(start)
	out, err := os.ReadFile(logPath)
	if err != nil {
		return result{status: statusError, first: err.Error(), dir: dir}
	}
	status, first := classify(test, out, runErr, ctx.Err() != nil)
	r := result{status: status, elapsed: elapsed, first: first, dir: dir}
	srv.stop() // kfake writes what it was asked for as it exits
	if apis, err := readAPISet(filepath.Join(dir, apisFile)); err == nil {
		r.apis = apis
	}
	return r
}

var (
	// A t.Error, t.Fatal, t.Skip or t.Log line of `go test -v` output.
	testLine = regexp.MustCompile(`^\s+\w+_test\.go:\d+: (.*)$`)
	// `go test -v`'s line before a test's output.
	progressLine = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	// A test or subtest that did not fail.
	resultLine = regexp.MustCompile(`(?m)^\s*--- (?:PASS|SKIP): (\S+) `)
	// t.Logf lines of kgo's helpers that report, not fail.
	logOnly = []string{
		"deleting topic", "deleting group", "unable to delete",
		"FAILED TESTING -- NOT DELETING", "completed in", "writes succeeded", "writes failed",
	}
)

// classify reads a test's outcome from its `go test -v` output and the
// binary's exit: the "--- PASS/FAIL/SKIP: Name" line when there is one.
func classify(test string, out []byte, runErr error, killed bool) (status, first string) {
	text := string(out)
	switch {
	case strings.Contains(text, "--- PASS: "+test+" "):
		return statusPass, ""
	case strings.Contains(text, "--- SKIP: "+test+" "):
		return statusSkip, firstLine(out, false)
	case killed || strings.Contains(text, "panic: test timed out after"):
		if first := firstLine(out, true); first != "" && !strings.HasPrefix(first, "=== ") {
			return statusTimeout, first
		}
		return statusTimeout, "killed: no result 30 s past --timeout"
	case strings.Contains(text, "--- FAIL: "+test+" "):
		return statusFail, firstLine(out, true)
	case runErr == nil:
		// Exit 0 with no result line: the name matched no test.
		return statusError, "no such test in the kgo test binary"
	}
	var exitErr *exec.ExitError
	if !errors.As(runErr, &exitErr) {
		return statusError, runErr.Error()
	}
	return statusFail, firstLine(out, true)
}

// firstLine is the first line of the output that explains a failure or a
// skip: a test's own error or skip line, else a panic, else the last line.
// When failed, lines of subtests that passed or skipped (a skipped KIP-848
// variant next to a failed classic one) are passed over: `go test -v` names
// the test each line belongs to in its "=== RUN/CONT/NAME" lines.
func firstLine(out []byte, failed bool) string {
	passed := map[string]bool{}
	if failed {
		for _, m := range resultLine.FindAllSubmatch(out, -1) {
			passed[string(m[1])] = true
		}
	}
	var current, panicLine, last string
	for line := range bytes.Lines(out) {
		raw := string(bytes.TrimRight(line, "\n"))
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		if m := progressLine.FindStringSubmatch(raw); m != nil {
			current = m[1]
			continue
		}
		if m := testLine.FindStringSubmatch(raw); m != nil && !isLogOnly(m[1]) && !passed[current] {
			return s
		}
		if panicLine == "" && strings.HasPrefix(s, "panic: ") {
			panicLine = s
		}
		if s != "FAIL" && !strings.HasPrefix(s, "--- FAIL") && !strings.HasPrefix(s, "exit status") {
			last = s
		}
	}
	if panicLine != "" {
		return panicLine
	}
	return last
}

func isLogOnly(msg string) bool {
	for _, s := range logOnly {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// String is the result as a table cell.
func (r result) String() string {
	if r.status == statusError {
		return r.status
	}
	return fmt.Sprintf("%s %.1fs", r.status, r.elapsed.Seconds())
}
