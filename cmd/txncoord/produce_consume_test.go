package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestProduceConsume: `produce` writes a line per record (plain, in a
// committed transaction, in an aborted one), and `consume` reads them back
// as rpk does: read_committed without the aborted ones, read_uncommitted
// with them, keys and headers kept; a group's second read starts where its
// first stopped.
func TestProduceConsume(t *testing.T) {
	base := freePortRun(t, 3)
	up := startUp(t, "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2", "--topics", "cli:1", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+2))
	defer up.stop(t)
	admin := []string{"--admin", up.adminURL}
	produce := func(stdin string, args ...string) []producedRecord {
		t.Helper()
		cmd := exec.Command(txncoordBinary(t), append(append([]string{"produce", "--topic", "cli", "-o", "json"}, args...), admin...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("produce %v: %v: %s", args, err, stderr.String())
		}
		var recs []producedRecord
		for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); {
			var r producedRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("produce output %q: %v", sc.Text(), err)
			}
			recs = append(recs, r)
		}
		return recs
	}
	consume := func(args ...string) []consumedRecord {
		t.Helper()
		stdout, stderr, code := runCLI(t, append(append([]string{"consume", "--topic", "cli", "-o", "json", "--timeout", "20s"}, args...), admin...)...)
		if code != 0 {
			t.Fatalf("consume %v: exit %d: %s", args, code, stderr)
		}
		var recs []consumedRecord
		for sc := bufio.NewScanner(strings.NewReader(stdout)); sc.Scan(); {
			var r consumedRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("consume output %q: %v", sc.Text(), err)
			}
			recs = append(recs, r)
		}
		return recs
	}
	values := func(recs []consumedRecord) string {
		var vs []string
		for _, r := range recs {
			vs = append(vs, *r.Value)
		}
		return strings.Join(vs, ",")
	}

	if recs := produce("a\nb\n", "--key", "k", "--header", "src=cli"); len(recs) != 2 || recs[0].Offset != 0 || recs[1].Offset != 1 {
		t.Fatalf("plain produce: %+v", recs)
	}
	produce("x\n", "--transactional-id", "cli-txn", "--abort")
	produce("c\n", "--transactional-id", "cli-txn")

	// a, b, c committed; x aborted (4 records, 2 markers: offsets 0–5).
	committed := consume("--num", "3")
	if values(committed) != "a,b,c" || *committed[0].Key != "k" || committed[0].Headers["src"] != "cli" {
		t.Fatalf("read_committed: %+v", committed)
	}
	if all := consume("--num", "4", "--isolation", "read_uncommitted"); values(all) != "a,b,x,c" {
		t.Fatalf("read_uncommitted: %s", values(all))
	}
	if from := consume("--num", "1", "--offset", "1"); values(from) != "b" {
		t.Fatalf("--offset 1: %s", values(from))
	}

	// A group reads two, commits, and its next run goes on from there.
	if first := consume("--num", "2", "--group", "cli-readers"); values(first) != "a,b" {
		t.Fatalf("group, first run: %s", values(first))
	}
	if next := consume("--num", "1", "--group", "cli-readers"); values(next) != "c" {
		t.Fatalf("group, second run: %s", values(next))
	}
	if _, stderr, code := runCLI(t, append([]string{"consume", "--topic", "cli", "--isolation", "dirty"}, admin...)...); code != 2 || !strings.Contains(stderr, "--isolation") {
		t.Fatalf("a bad --isolation: exit %d: %s", code, stderr)
	}

	// `status` counts what happened: one transactional id (its last
	// transaction committed), one empty group, no marker pending.
	var st clusterStatus
	cliJSON(t, &st, append([]string{"status", "-o", "json"}, admin...)...)
	if st.Transactions["CompleteCommit"] != 1 || len(st.Transactions) != 1 || st.Groups["Empty"] != 1 || st.Pending != 0 ||
		len(st.Leaders) != 1 || len(st.Coordinators) != 1 || st.Partitions < 1 {
		t.Fatalf("status: %+v", st)
	}
}
