package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txncoord/txncoord/internal/historytest"
)

// TestSeparateProcessKill: a `txncoord coordinator` and two `txncoord
// leader` processes, each with its own admin listener (the leaders'
// --admin-listen serves /v1/faults, /metrics and /healthz). A kgo
// transactional producer commits in a loop while, through the admin API
// of the process that runs it, the coordinator is killed (its Kafka
// address refuses connections, its admin listener answers the faults and
// 503 for the transactions) and restarted, then leader 1 likewise: each
// restart reopens the node's state in its data dir, and the history
// checker finds 0 anomalies in the final read_committed read (every value
// committed before a kill read after it, once).
func TestSeparateProcessKill(t *testing.T) {
	base := freePortRun(t, 6) // coordinator, 2 leaders, 3 admin listeners
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	body := fmt.Sprintf(`cluster_id: separate-kill
coordinator: {node_id: 0, addr: 127.0.0.1:%d, kafka_version: "4.2"}
leaders:
  - {node_id: 1, addr: 127.0.0.1:%d, kafka_version: "4.2"}
  - {node_id: 2, addr: 127.0.0.1:%d, kafka_version: "4.2"}
topics:
  orders: 4
`, base, base+1, base+2)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := func(id int) string { return "127.0.0.1:" + strconv.Itoa(base+id) }
	adminURL := func(id int) string { return "http://127.0.0.1:" + strconv.Itoa(base+3+id) }
	run := func(id int, args ...string) {
		args = append(args, "--cluster", file, "--data-dir", filepath.Join(dir, "data-"+strconv.Itoa(id)),
			"--admin-listen", strings.TrimPrefix(adminURL(id), "http://"))
		startNodeProcess(t, fmt.Sprintf("node %d", id), args...)
		waitFor(t, fmt.Sprintf("node %d's admin listener", id), func() bool {
			resp, err := http.Get(adminURL(id) + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	run(1, "leader", "--node-id", "1")
	run(2, "leader", "--node-id", "2")
	run(0, "coordinator", "--node-id", "0")
	seeds := []string{addr(0), addr(1), addr(2)}

	c := historytest.Start(t, seeds, "separate-kill")
	c.WaitCommits(t, 0, 3)
	for _, id := range []int{0, 1} {
		f := addFault(t, adminURL(id), map[string]any{"kind": "kill", "node": id})
		if conn, err := net.DialTimeout("tcp", addr(id), time.Second); err == nil {
			conn.Close()
			t.Fatalf("killed node %d still accepts connections on %s", id, addr(id))
		}
		before := c.Commits()
		if l := listFaults(t, adminURL(id)); len(l.Faults) != 1 || l.Faults[0].Kind != "kill" {
			t.Fatalf("GET /v1/faults of node %d while it is killed: %+v", id, l.Faults)
		}
		if id == 0 {
			if code := faultHTTP(t, http.MethodGet, adminURL(0)+"/v1/transactions", nil, nil); code != http.StatusServiceUnavailable {
				t.Fatalf("GET /v1/transactions while the coordinator is killed: HTTP %d, want 503", code)
			}
		}
		time.Sleep(time.Second) // the producer meets the dead node
		if code := faultHTTP(t, http.MethodDelete, fmt.Sprintf("%s/v1/faults/%d", adminURL(id), f.ID), nil, nil); code != http.StatusOK {
			t.Fatalf("restart node %d: HTTP %d", id, code)
		}
		c.WaitCommits(t, before, 3)
	}
	if code := faultHTTP(t, http.MethodGet, adminURL(1)+"/v1/transactions", nil, nil); code != http.StatusNotFound {
		t.Errorf("a leader's admin listener answered GET /v1/transactions with %d, want 404 (it serves only faults, metrics, health)", code)
	}
	historytest.Check(t, addr(0), c.Finish())
}

// startNodeProcess runs txncoord with args until the test ends (SIGKILL
// then), its stderr logged as label's if the test failed.
func startNodeProcess(t *testing.T, label string, args ...string) {
	t.Helper()
	cmd := exec.Command(txncoordBinary(t), args...)
	cmd.Env = envWithout()
	stderr := &strings.Builder{}
	cmd.Stderr = &lockedWriter{w: stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s stderr:\n%s", label, stderr.String())
		}
	})
}
