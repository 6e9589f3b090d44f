package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
)

// TestUpSeveralCoordinators: `txncoord up --coordinators 3` runs three
// coordinators on an embedded etcd under DATA_DIR/etcd, writes the
// coordinators: form of cluster.yaml, and `txncoord coordinators` shows
// each with its share of the partitions. Transactions committed through
// it are still there after a SIGKILL and a restart on the same data dir
// (etcd's own log), with higher coordinator epochs, and new ones commit.
func TestUpSeveralCoordinators(t *testing.T) {
	base := freePortRun(t, 8) // 3 coordinators, 3 leaders, etcd client and peer
	adminPort := freePortRun(t, 1)
	dataDir := t.TempDir()
	args := []string{"--data-dir", dataDir, "--listen", "127.0.0.1:" + strconv.Itoa(base), "--coordinators", "3",
		"--admin-listen", "127.0.0.1:" + strconv.Itoa(adminPort), "--topics", "orders:3", "--transaction-state-partitions", "9",
		"--etcd-lease-ttl", "4s"}
	first := startUpEnv(t, []string{"TXNCOORD_LOG_FORMAT=json", "TXNCOORD_LOG_LEVEL=debug"}, args...)
	up := first.upProcess
	file, err := os.ReadFile(filepath.Join(dataDir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"coordinators:", "node_id: 2", "node_id: 3", "http://127.0.0.1:" + strconv.Itoa(base+6), "transaction_state_partitions: 9", "lease_ttl_seconds: 4"} {
		if !strings.Contains(string(file), want) {
			t.Fatalf("cluster.yaml lacks %q:\n%s", want, file)
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "etcd", "member")); err != nil {
		t.Fatalf("no embedded etcd data: %v", err)
	}
	// Ready means served: right after the ready line every partition has
	// an owner (they had none yet when the line came at the listeners'
	// start), and the first InitProducerId of ids spread over the
	// partitions, sent once to the coordinator FindCoordinator names, is
	// answered.
	var atReady []admin.CoordinatorStatus
	cliJSON(t, &atReady, "coordinators", "--admin", up.adminURL, "-o", "json")
	// `leaders` says whose marker sender it shows: node 0's admin API.
	if out, errOut, code := runCLI(t, "leaders", "--admin", up.adminURL); code != 0 || !strings.HasPrefix(out, "Marker sender of coordinator 0 ") {
		t.Fatalf("leaders: exit %d, stdout %q, stderr %q: want it to name coordinator 0's marker sender first", code, out, errOut)
	}
	owned := 0
	for _, c := range atReady {
		owned += len(c.Partitions)
	}
	if owned != 9 {
		t.Fatalf("%d of 9 partitions owned right after the ready line: %+v", owned, atReady)
	}
	firstInit(t, up.bootstrap, 18)
	var cs []admin.CoordinatorStatus
	waitFor(t, "every partition owned", func() bool {
		cliJSON(t, &cs, "coordinators", "--admin", up.adminURL, "-o", "json")
		n := 0
		for _, c := range cs {
			n += len(c.Partitions)
		}
		return len(cs) == 3 && n == 9
	})
	epochs := map[int32]int32{}
	for _, c := range cs {
		if !c.Live {
			t.Fatalf("coordinator %d not live: %+v", c.NodeID, cs)
		}
		for _, p := range c.Partitions {
			epochs[p.Partition] = p.Epoch
		}
	}
	commit := func(ids ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range ids {
			cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.TransactionalID(id), kgo.DefaultProduceTopic("orders"))
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(id)}).FirstErr(); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			cl.Close()
		}
	}
	var ids []string
	for i := range 6 {
		ids = append(ids, fmt.Sprintf("up3-%d", i))
	}
	commit(ids...)

	up.cmd.Process.Kill()
	<-up.done
	// Every line it logged, at debug level, is one JSON object whose keys
	// are each written once.
	lines := 0
	for _, line := range strings.Split(first.logs(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		lines++
		if dup := duplicateKey(line); dup != "" {
			t.Errorf("a log line repeats the key %q: %s", dup, line)
		}
	}
	if lines == 0 {
		t.Fatal("up logged no JSON line")
	}
	// At info level a start says per coordinator, in one line, what it
	// serves; the per-partition lines are debug.
	summaries := 0
	for _, line := range strings.Split(first.logs(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["level"] != "info" {
			continue
		}
		switch rec["message"] {
		case "coordinator serving its __transaction_state partitions":
			summaries++
		case "ownership: acquired partition", "serving partition", "coordinator loaded":
			t.Errorf("a per-partition line at info: %s", line)
		}
	}
	if summaries != 3 {
		t.Errorf("%d summary lines at start, want one per coordinator (3)", summaries)
	}
	up = startUp(t, args...)
	var txns []admin.Txn
	waitFor(t, "the committed transactions listed after the restart", func() bool {
		cliJSON(t, &txns, "txn", "list", "--admin", up.adminURL, "-o", "json")
		complete := 0
		for _, txn := range txns {
			if strings.HasPrefix(txn.TransactionalID, "up3-") && txn.State == "CompleteCommit" {
				complete++
			}
		}
		return complete == len(ids)
	})
	waitFor(t, "higher coordinator epochs after the restart", func() bool {
		cliJSON(t, &cs, "coordinators", "--admin", up.adminURL, "-o", "json")
		n := 0
		for _, c := range cs {
			for _, p := range c.Partitions {
				if p.Epoch <= epochs[p.Partition] {
					return false
				}
				n++
			}
		}
		return n == 9
	})
	commit("up3-after-restart", ids[0])
	up.stop(t)
}

// firstInit sends each of n transactional ids one FindCoordinator and one
// InitProducerId, with no retry, and requires both to succeed.
func firstInit(t *testing.T, bootstrap string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		id := fmt.Sprintf("first-init-%d", i)
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorType, find.CoordinatorKey, find.CoordinatorKeys = 1, id, []string{id}
		raw, err := cl.SeedBrokers()[0].Request(ctx, find) // no client-side retry
		if err != nil {
			t.Fatalf("FindCoordinator %s: %v", id, err)
		}
		fr := raw.(*kmsg.FindCoordinatorResponse)
		node, code := fr.NodeID, fr.ErrorCode
		if len(fr.Coordinators) == 1 {
			node, code = fr.Coordinators[0].NodeID, fr.Coordinators[0].ErrorCode
		}
		if code != 0 {
			t.Fatalf("FindCoordinator %s right after ready: error %d", id, code)
		}
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
		raw, err = cl.Broker(int(node)).Request(ctx, init)
		if err != nil {
			t.Fatalf("InitProducerId %s: %v", id, err)
		}
		if code := raw.(*kmsg.InitProducerIDResponse).ErrorCode; code != 0 {
			t.Fatalf("InitProducerId %s at coordinator %d right after ready: error %d, want 0", id, node, code)
		}
	}
}

// duplicateKey is the first key a JSON object repeats at its top level
// ("" if none, or if line is not an object).
func duplicateKey(line string) string {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := tok.(string)
		if seen[key] {
			return key
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
