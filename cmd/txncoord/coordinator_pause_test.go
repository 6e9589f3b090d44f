package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/internal/etcdtest"
)

// TestSeparateCoordinatorPause: two `txncoord coordinator` processes on
// etcd, the lease from the cluster file (1 s). A pause fault on node 1,
// through its own admin API, stops its etcd keepalives as a stopped
// process would: its lease lapses and node 0 takes every partition over;
// once the fault ends node 1 claims its share again.
func TestSeparateCoordinatorPause(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	base := freePortRun(t, 5) // 2 coordinators, 1 leader, 2 admin APIs
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	body := fmt.Sprintf(`cluster_id: pause-test
coordinators:
  - {node_id: 0, addr: 127.0.0.1:%d, kafka_version: "4.2"}
  - {node_id: 1, addr: 127.0.0.1:%d, kafka_version: "4.2"}
leaders:
  - {node_id: 2, addr: 127.0.0.1:%d, kafka_version: "4.2"}
etcd: {endpoints: [%q], lease_ttl_seconds: 1}
transaction_state_partitions: 6
`, base, base+1, base+2, etcd.Endpoints()[0])
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	adminURL := func(id int) string { return "http://127.0.0.1:" + strconv.Itoa(base+3+id) }
	for id := range 2 {
		startNodeProcess(t, fmt.Sprintf("coordinator %d", id), "coordinator", "--cluster", file, "--node-id", strconv.Itoa(id),
			"--data-dir", filepath.Join(dir, "data-"+strconv.Itoa(id)), "--admin-listen", strings.TrimPrefix(adminURL(id), "http://"))
	}
	owned := func() map[int32]int {
		var cs []admin.CoordinatorStatus
		resp, err := http.Get(adminURL(0) + "/v1/coordinators")
		if err != nil {
			return nil // not listening yet
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&cs) != nil {
			return nil
		}
		out := map[int32]int{}
		for _, c := range cs {
			if c.Live {
				out[c.NodeID] = len(c.Partitions)
			}
		}
		return out
	}
	waitFor(t, "both coordinators to own partitions", func() bool { o := owned(); return o[0] > 0 && o[1] > 0 && o[0]+o[1] == 6 })
	f := addFault(t, adminURL(1), map[string]any{"kind": "pause", "node": 1})
	waitFor(t, "node 0 to take every partition over from the paused node 1", func() bool { o := owned(); return o[0] == 6 && o[1] == 0 })
	if code := faultHTTP(t, http.MethodDelete, fmt.Sprintf("%s/v1/faults/%d", adminURL(1), f.ID), nil, nil); code != http.StatusOK {
		t.Fatalf("end the pause: HTTP %d", code)
	}
	waitFor(t, "node 1 to claim partitions again", func() bool { o := owned(); return o[1] > 0 && o[0]+o[1] == 6 })
}
