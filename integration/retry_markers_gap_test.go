package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/txncoord/txncoord/admin"
)

// adminDo sends one admin API request and returns the status and body.
func adminDo(t *testing.T, method, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// stuckGauge reads txncoord_marker_stuck_transactions from GET /metrics.
func stuckGauge(t *testing.T, adminURL string) string {
	t.Helper()
	code, body := adminDo(t, http.MethodGet, adminURL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "txncoord_marker_stuck_transactions "); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no txncoord_marker_stuck_transactions sample")
	return ""
}

// TestRetryMarkersEndToEnd: with version discovery off (Kafka 4.2.0) two
// transactions hang at a 4.1 leader that closes the connection on
// WriteTxnMarkers v2, and are reported stuck. Fixing the cause (the leader
// restarted as 4.2) does not resend them by itself; `POST
// /v1/transactions/{id}/retry-markers` does for one, `txncoord txn
// retry-markers` (the built binary) for the other, and both then complete
// (CompleteCommit, their records visible to read_committed on the formerly
// stuck partition). Retrying a completed transaction is 409, an unknown id
// 404; the CLI's error is one line with exit code 1.
func TestRetryMarkersEndToEnd(t *testing.T) {
	bin := txncoordBinary(t) // built first: its time is not the transactions'
	c := StartCluster(t, Options{LeaderVersions: []string{"4.2", "4.1"}, Topics: map[string]int32{"orders": 4},
		NoDiscovery: true, Admin: true})
	ctx := testCtx(t, 90*time.Second)
	adminURL := c.Admin.URL()
	p1 := partitionOn(t, c, "orders", 4, 1)
	p2 := partitionOn(t, c, "orders", 4, 2)
	ids := []string{"retry-http", "retry-cli"}
	for _, id := range ids {
		runTxn(ctx, t, c.txnProducer(t, id), "orders", []int32{p1, p2}, id, true)
	}

	describe := func(id string) admin.Txn {
		t.Helper()
		code, body := adminDo(t, http.MethodGet, adminURL+"/v1/transactions/"+id)
		if code != http.StatusOK {
			t.Fatalf("GET /v1/transactions/%s: %d %s", id, code, body)
		}
		var tx admin.Txn
		if err := json.Unmarshal(body, &tx); err != nil {
			t.Fatalf("GET /v1/transactions/%s: %v: %s", id, err, body)
		}
		return tx
	}
	for _, id := range ids {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			tx := describe(id)
			if tx.StuckReason != "" {
				if tx.State != "PrepareCommit" || !strings.Contains(tx.StuckReason, "leader 2") {
					t.Fatalf("%s stuck as %+v, want PrepareCommit with leader 2 in the reason", id, tx)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never reported stuck: %+v", id, tx)
			}
		}
	}
	if g := stuckGauge(t, adminURL); g != "2" {
		t.Fatalf("txncoord_marker_stuck_transactions = %s with two stuck transactions, want 2", g)
	}

	// The cause goes away; a stuck transaction stays stuck until retried.
	c.RestartLeader(2, "4.2")
	time.Sleep(300 * time.Millisecond)
	for _, id := range ids {
		if tx := describe(id); tx.State != "PrepareCommit" || tx.StuckReason == "" {
			t.Fatalf("%s changed before any retry: %+v", id, tx)
		}
	}

	// Retry through the HTTP API.
	code, body := adminDo(t, http.MethodPost, adminURL+"/v1/transactions/retry-http/retry-markers")
	if code != http.StatusOK {
		t.Fatalf("POST retry-markers: %d %s", code, body)
	}
	var retried admin.Txn
	if err := json.Unmarshal(body, &retried); err != nil || retried.TransactionalID != "retry-http" {
		t.Fatalf("POST retry-markers answered %s (%v)", body, err)
	}
	c.waitState(t, "retry-http", "CompleteCommit")
	if tx := describe("retry-cli"); tx.StuckReason == "" {
		t.Fatalf("retrying retry-http also un-stuck retry-cli: %+v", tx)
	}

	// Retry through the CLI.
	cliCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cliCtx, bin, "txn", "retry-markers", "--transactional-id", "retry-cli", "--admin", adminURL).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "retry-cli") {
		t.Fatalf("txncoord txn retry-markers: %v: %s", err, out)
	}
	c.waitState(t, "retry-cli", "CompleteCommit")
	for _, id := range ids {
		if tx := describe(id); tx.State != "CompleteCommit" || tx.StuckReason != "" {
			t.Fatalf("%s after retry: %+v", id, tx)
		}
	}
	if g := stuckGauge(t, adminURL); g != "0" {
		t.Fatalf("txncoord_marker_stuck_transactions = %s after both completed, want 0", g)
	}

	// The records are committed on the formerly stuck partition: the
	// leader wrote the retried markers.
	got := c.consumeUntil(ctx, t, "orders", []int32{p2}, true,
		fmt.Sprintf("retry-http-p%d", p2), fmt.Sprintf("retry-cli-p%d", p2))
	if len(got) != 2 {
		t.Fatalf("read_committed on orders-%d: %v", p2, got)
	}
	for _, id := range ids {
		var ok bool
		for _, m := range c.markersOf(2, describe(id).ProducerID) {
			ok = ok || (m.RequestVersion == 2 && m.ErrorCode == 0 && m.Commit)
		}
		if !ok {
			t.Fatalf("the restarted leader 2 accepted no commit marker for %s", id)
		}
	}

	// Nothing to retry any more: 409; an unknown id: 404; the CLI says so
	// in one line with exit code 1.
	if code, body := adminDo(t, http.MethodPost, adminURL+"/v1/transactions/retry-http/retry-markers"); code != http.StatusConflict {
		t.Fatalf("POST retry-markers on a completed transaction: %d %s, want 409", code, body)
	}
	if code, body := adminDo(t, http.MethodPost, adminURL+"/v1/transactions/no-such-id/retry-markers"); code != http.StatusNotFound {
		t.Fatalf("POST retry-markers on an unknown id: %d %s, want 404", code, body)
	}
	cmd := exec.CommandContext(cliCtx, bin, "txn", "retry-markers", "--transactional-id", "retry-cli", "--admin", adminURL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	ee, isExit := err.(*exec.ExitError)
	if !isExit || ee.ExitCode() != 1 {
		t.Fatalf("txn retry-markers on a completed transaction: %v, want exit code 1; stderr %q", err, stderr.String())
	}
	if s := stderr.String(); strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") || !strings.Contains(s, "409") {
		t.Fatalf("txn retry-markers on a completed transaction: stderr %q, want one line naming 409", s)
	}
}
