package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/internal/historytest"
)

// TestSeparateCoordinatorPause: two `txncoord coordinator` processes on
// etcd, the lease from the cluster file (1 s). A pause fault on node 1,
// through its own admin API, stops its etcd keepalives as a stopped
// process would: its lease lapses and node 0 takes every partition over;
// once the fault ends node 1 claims its share again.
func TestSeparateCoordinatorPause(t *testing.T) {
	sc := startSeparateCoordinators(t)
	sc.waitOwned(t)
	f := addFault(t, sc.adminURL(1), map[string]any{"kind": "pause", "node": 1})
	waitFor(t, "node 0 to take every partition over from the paused node 1", func() bool { o := sc.owned(); return o[0] == 6 && o[1] == 0 })
	if code := faultHTTP(t, http.MethodDelete, fmt.Sprintf("%s/v1/faults/%d", sc.adminURL(1), f.ID), nil, nil); code != http.StatusOK {
		t.Fatalf("end the pause: HTTP %d", code)
	}
	waitFor(t, "node 1 to claim partitions again", func() bool { o := sc.owned(); return o[1] > 0 && o[0]+o[1] == 6 })
}

// TestSeparateCoordinatorKill: the same processes; a kgo transactional
// producer whose id node 1 coordinates commits in a loop while node 1 is
// killed through its own admin listener (its address refuses
// connections, its lease is revoked and node 0 takes every partition
// over at once; the producer commits through node 0) and restarted (it
// dials etcd again and claims its share). The history checker finds 0
// anomalies.
func TestSeparateCoordinatorKill(t *testing.T) {
	sc := startSeparateCoordinators(t)
	sc.waitOwned(t)
	id := ""
	for i := 0; id == "" && i < 1000; i++ {
		cand := fmt.Sprintf("separate-kill-%d", i)
		if sc.owner(cluster.TransactionPartitionFor(cand, 6)) == 1 {
			id = cand
		}
	}
	if id == "" {
		t.Fatal("no transactional id whose partition coordinator 1 owns")
	}
	seeds := []string{sc.addr(0), sc.addr(1), sc.addr(2)}
	c := historytest.Start(t, seeds, id)
	c.WaitCommits(t, 0, 3)
	f := addFault(t, sc.adminURL(1), map[string]any{"kind": "kill", "node": 1})
	if conn, err := net.DialTimeout("tcp", sc.addr(1), time.Second); err == nil {
		conn.Close()
		t.Fatalf("killed coordinator 1 still accepts connections on %s", sc.addr(1))
	}
	waitFor(t, "node 0 to take every partition over from the killed node 1", func() bool { o := sc.owned(); return o[0] == 6 && o[1] == 0 })
	before := c.Commits()
	c.WaitCommits(t, before, 3)
	if code := faultHTTP(t, http.MethodDelete, fmt.Sprintf("%s/v1/faults/%d", sc.adminURL(1), f.ID), nil, nil); code != http.StatusOK {
		t.Fatalf("restart coordinator 1: HTTP %d", code)
	}
	waitFor(t, "node 1 to claim partitions again", func() bool { o := sc.owned(); return o[1] > 0 && o[0]+o[1] == 6 })
	c.WaitCommits(t, c.Commits(), 3)
	historytest.Check(t, sc.addr(0), c.Finish())
}

// separateCoordinators are two coordinator processes on a real etcd and
// one leader process, with topic orders (4 partitions).
type separateCoordinators struct{ base int }

func (sc separateCoordinators) addr(id int) string { return "127.0.0.1:" + strconv.Itoa(sc.base+id) }
func (sc separateCoordinators) adminURL(id int) string {
	return "http://127.0.0.1:" + strconv.Itoa(sc.base+3+id)
}

func startSeparateCoordinators(t *testing.T) separateCoordinators {
	etcd := etcdtest.Start(t, 1)
	sc := separateCoordinators{base: freePortRun(t, 5)} // 2 coordinators, 1 leader, 2 admin APIs
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	body := fmt.Sprintf(`cluster_id: pause-test
coordinators:
  - {node_id: 0, addr: %s, kafka_version: "4.2"}
  - {node_id: 1, addr: %s, kafka_version: "4.2"}
leaders:
  - {node_id: 2, addr: %s, kafka_version: "4.2"}
etcd: {endpoints: [%q], lease_ttl_seconds: 1}
transaction_state_partitions: 6
topics:
  orders: 4
`, sc.addr(0), sc.addr(1), sc.addr(2), etcd.Endpoints()[0])
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for id := range 2 {
		startNodeProcess(t, fmt.Sprintf("coordinator %d", id), "coordinator", "--cluster", file, "--node-id", strconv.Itoa(id),
			"--data-dir", filepath.Join(dir, "data-"+strconv.Itoa(id)), "--admin-listen", strings.TrimPrefix(sc.adminURL(id), "http://"))
	}
	startNodeProcess(t, "leader 2", "leader", "--cluster", file, "--node-id", "2", "--data-dir", filepath.Join(dir, "data-2"))
	return sc
}

// coordinators is GET /v1/coordinators of node 0 (nil when it does not
// answer yet).
func (sc separateCoordinators) coordinators() []admin.CoordinatorStatus {
	var cs []admin.CoordinatorStatus
	resp, err := http.Get(sc.adminURL(0) + "/v1/coordinators")
	if err != nil {
		return nil // not listening yet
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&cs) != nil {
		return nil
	}
	return cs
}

// owned is how many partitions each live coordinator owns.
func (sc separateCoordinators) owned() map[int32]int {
	out := map[int32]int{}
	for _, c := range sc.coordinators() {
		if c.Live {
			out[c.NodeID] = len(c.Partitions)
		}
	}
	return out
}

// owner is the live coordinator owning __transaction_state partition p
// (-1: none).
func (sc separateCoordinators) owner(p int32) int32 {
	for _, c := range sc.coordinators() {
		for _, o := range c.Partitions {
			if c.Live && o.Partition == p {
				return c.NodeID
			}
		}
	}
	return -1
}

func (sc separateCoordinators) waitOwned(t *testing.T) {
	t.Helper()
	waitFor(t, "both coordinators to own partitions", func() bool { o := sc.owned(); return o[0] > 0 && o[1] > 0 && o[0]+o[1] == 6 })
}
