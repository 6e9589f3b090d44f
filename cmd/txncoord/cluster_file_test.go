package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpClusterFileUnchanged: the DATA_DIR/cluster.yaml `up` writes for one
// coordinator is byte for byte what it was before the cluster file learned
// coordinators:, etcd: and transaction_state_partitions (issue 19): the
// single `coordinator:` form, none of the new keys.
func TestUpClusterFileUnchanged(t *testing.T) {
	base := freePortRun(t, 4)
	dir := t.TempDir()
	up := startUp(t, "--data-dir", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.1", "--topics", "orders:6,payments:1", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3))
	got, err := os.ReadFile(filepath.Join(dir, "cluster.yaml"))
	up.stop(t)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("P0", fmt.Sprint(base), "P1", fmt.Sprint(base+1), "P2", fmt.Sprint(base+2)).Replace(
		`cluster_id: txncoord-local
coordinator:
    node_id: 0
    addr: 127.0.0.1:P0
    kafka_version: "4.2"
leaders:
    - node_id: 1
      addr: 127.0.0.1:P1
      kafka_version: "4.2"
    - node_id: 2
      addr: 127.0.0.1:P2
      kafka_version: "4.1"
default_partitions: 3
topics:
    orders: 6
    payments: 1
auto_create_topics_enable: true
`)
	if string(got) != want {
		t.Fatalf("cluster.yaml changed:\n%s\nwant:\n%s", got, want)
	}
}

// TestCoordinatorNodeID: `txncoord coordinator --node-id N` must name one
// of the cluster file's coordinators, refused with one line and exit 2
// before anything starts; a coordinators: list of one is today's single
// coordinator and is accepted.
func TestCoordinatorNodeID(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	three := write("three.yaml", `coordinators:
  - {node_id: 0, addr: 127.0.0.1:1, kafka_version: "4.2"}
  - {node_id: 1, addr: 127.0.0.1:2, kafka_version: "4.2"}
  - {node_id: 2, addr: 127.0.0.1:3, kafka_version: "4.2"}
leaders:
  - {node_id: 3, addr: 127.0.0.1:4, kafka_version: "4.2"}
etcd: {endpoints: ["http://127.0.0.1:5"]}
`)
	for _, id := range []string{"3", "-1"} {
		data := filepath.Join(dir, "data-"+id)
		stdout, stderr, code := runCLI(t, "coordinator", "--cluster", three, "--node-id", id, "--data-dir", data)
		want := "txncoord: --node-id " + id + ": the cluster file's coordinators are nodes 0..2\n"
		if code != 2 || stderr != want || stdout != "" {
			t.Fatalf("--node-id %s: exit %d, stdout %q, stderr %q; want exit 2 and only stderr %q", id, code, stdout, stderr, want)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Fatalf("the data dir exists (%v): something started", err)
		}
	}
	// A list of one gets past the file: what fails is the flag checked
	// after it.
	one := write("one.yaml", `coordinators:
  - {node_id: 0, addr: 127.0.0.1:1, kafka_version: "4.2"}
leaders:
  - {node_id: 1, addr: 127.0.0.1:2, kafka_version: "4.2"}
`)
	_, stderr, code := runCLI(t, "coordinator", "--cluster", one, "--data-dir", filepath.Join(dir, "one-data"), "--max-inflight-request-bytes", "0")
	if code != 2 || !strings.Contains(stderr, "--max-inflight-request-bytes 0") {
		t.Fatalf("exit %d, stderr %q; want the flag refused, the file accepted", code, stderr)
	}
}
