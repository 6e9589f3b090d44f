package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/integration/checker"
)

// Faults on demand against a running `txncoord up --leaders 4.2,4.1`,
// driven with plain HTTP as a suite in any language would, and seen
// through kgo, a real client.

// faultHTTP sends one admin API request with a JSON body (nil: none) and
// decodes the answer into out (nil: ignored); it returns the status.
func faultHTTP(t *testing.T, method, url string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, raw)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

type faultJSON struct {
	ID       uint64 `json:"id"`
	Kind     string `json:"kind"`
	Node     int32  `json:"node"`
	Injected int64  `json:"injected"`
}

type faultListJSON struct {
	Faults      []faultJSON `json:"faults"`
	HeldMarkers []struct {
		ID      uint64 `json:"id"`
		Leader  int32  `json:"leader"`
		Held    bool   `json:"held"`
		Markers []struct {
			ProducerID int64 `json:"producer_id"`
			Committed  bool  `json:"committed"`
		} `json:"markers"`
	} `json:"held_markers"`
}

func addFault(t *testing.T, adminURL string, spec map[string]any) faultJSON {
	t.Helper()
	var f faultJSON
	if code := faultHTTP(t, http.MethodPost, adminURL+"/v1/faults", spec, &f); code != http.StatusCreated {
		t.Fatalf("POST /v1/faults %v: HTTP %d", spec, code)
	}
	return f
}

func listFaults(t *testing.T, adminURL string) faultListJSON {
	t.Helper()
	var l faultListJSON
	if code := faultHTTP(t, http.MethodGet, adminURL+"/v1/faults", nil, &l); code != http.StatusOK {
		t.Fatalf("GET /v1/faults: HTTP %d", code)
	}
	return l
}

func faultOf(l faultListJSON, id uint64) (faultJSON, bool) {
	for _, f := range l.Faults {
		if f.ID == id {
			return f, true
		}
	}
	return faultJSON{}, false
}

// partitionLedBy finds a partition of topic led by leader.
func partitionLedBy(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions, leader int32) int32 {
	t.Helper()
	for p := range partitions {
		if leaderOf(t, ctx, cl, topic, p) == leader {
			return p
		}
	}
	t.Fatalf("no partition of %s led by %d", topic, leader)
	return -1
}

func TestFaultsOnDemand(t *testing.T) {
	base := freePortRun(t, 4)
	up := startUp(t, "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.1", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3), "--topics", "f:4,late:4")
	defer up.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(up.bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	probe := newClient()
	p1 := partitionLedBy(t, ctx, probe, "f", 4, 1)

	t.Run("error code seen by the client", func(t *testing.T) {
		f := addFault(t, up.adminURL, map[string]any{"kind": "error", "node": 1, "api_key": 0, "error_code": 29, "count": 1})
		cl := newClient(kgo.DisableIdempotentWrite())
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "f", Partition: p1, Value: []byte("refused")}).FirstErr()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("produce under an injected TOPIC_AUTHORIZATION_FAILED: %v, want that error", err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "f", Partition: p1, Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatalf("produce once the fault's count is spent: %v", err)
		}
		if _, ok := faultOf(listFaults(t, up.adminURL), f.ID); ok {
			t.Errorf("fault %d still listed after its one request", f.ID)
		}
		metrics := getText(t, up.adminURL+"/metrics")
		if !strings.Contains(metrics, `txncoord_faults_injected_total{kind="error",node="1"} 1`) {
			t.Errorf("/metrics lacks the injected error:\n%s", grepLines(metrics, "txncoord_faults"))
		}
	})

	t.Run("retriable error and dropped response: the client retries, the write happens once", func(t *testing.T) {
		addFault(t, up.adminURL, map[string]any{"kind": "error", "node": 1, "api_key": 0, "error_code": 6, "count": 2})
		drop := addFault(t, up.adminURL, map[string]any{"kind": "drop_response", "node": 1, "api_key": 0, "count": 1})
		cl := newClient() // idempotent: the retry of the dropped answer is a duplicate
		value := []byte("exactly-once-" + fmt.Sprint(time.Now().UnixNano()))
		rec := &kgo.Record{Topic: "f", Partition: p1, Value: value}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("produce through two NOT_LEADER_OR_FOLLOWER and a dropped answer: %v", err)
		}
		if l := listFaults(t, up.adminURL); len(l.Faults) != 0 {
			t.Errorf("faults left after the retries: %+v (drop fault %d)", l.Faults, drop.ID)
		}
		if n := countValue(t, ctx, up.bootstrap, "f", p1, rec.Offset, value); n != 1 {
			t.Errorf("the record is in the partition %d times, want 1 (the retry of a dropped answer is a duplicate)", n)
		}
	})

	t.Run("dropped request: the client reconnects and retries", func(t *testing.T) {
		addFault(t, up.adminURL, map[string]any{"kind": "drop_request", "node": 1, "api_key": 0, "count": 1})
		cl := newClient()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "f", Partition: p1, Value: []byte("dropped-once")}).FirstErr(); err != nil {
			t.Fatalf("produce after a dropped request: %v", err)
		}
		if l := listFaults(t, up.adminURL); len(l.Faults) != 0 {
			t.Errorf("drop fault not used: %+v", l.Faults)
		}
	})

	t.Run("delayed response outlasts the caller's deadline", func(t *testing.T) {
		f := addFault(t, up.adminURL, map[string]any{"kind": "delay_response", "node": 1, "api_key": 2, "delay": "1h", "count": 1})
		adm := kadm.NewClient(newClient())
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := adm.ListEndOffsets(short, "f")
		cancelShort()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ListOffsets under an hour's delay: %v, want the caller's deadline", err)
		}
		waitFor(t, "the delay to act", func() bool { g, ok := faultOf(listFaults(t, up.adminURL), f.ID); return !ok || g.Injected > 0 })
		if _, err := kadm.NewClient(newClient()).ListEndOffsets(ctx, "f"); err != nil {
			t.Errorf("ListOffsets once the delay's count is spent: %v", err)
		}
	})

	t.Run("paused node answers nothing until resumed", func(t *testing.T) {
		f := addFault(t, up.adminURL, map[string]any{"kind": "pause", "node": 1})
		cl := newClient(kgo.DisableIdempotentWrite())
		done := make(chan error, 1)
		go func() {
			done <- cl.ProduceSync(ctx, &kgo.Record{Topic: "f", Partition: p1, Value: []byte("paused")}).FirstErr()
		}()
		waitFor(t, "a request to reach the paused node", func() bool { g, _ := faultOf(listFaults(t, up.adminURL), f.ID); return g.Injected > 0 })
		select {
		case err := <-done:
			t.Fatalf("produce to a paused leader returned (%v) before it resumed", err)
		default:
		}
		if code := faultHTTP(t, http.MethodDelete, fmt.Sprintf("%s/v1/faults/%d", up.adminURL, f.ID), nil, nil); code != http.StatusOK {
			t.Fatalf("resume: HTTP %d", code)
		}
		if err := <-done; err != nil {
			t.Fatalf("produce after resume: %v", err)
		}
	})

	t.Run("killed leader: refused, restarted on its state, the producer's retries go through", func(t *testing.T) {
		cl := newClient()
		before := []byte("before-kill")
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "f", Partition: p1, Value: before}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		f := addFault(t, up.adminURL, map[string]any{"kind": "kill", "node": 1})
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", base+1)); err == nil {
			c.Close()
			t.Fatal("a killed leader's address accepted a connection")
		}
		after := []byte("after-kill")
		rec := &kgo.Record{Topic: "f", Partition: p1, Value: after}
		done := make(chan error, 1)
		go func() { done <- cl.ProduceSync(ctx, rec).FirstErr() }()
		select {
		case err := <-done:
			t.Fatalf("produce to a killed leader returned (%v) before it restarted", err)
		default:
		}
		if code := faultHTTP(t, http.MethodDelete, fmt.Sprintf("%s/v1/faults/%d", up.adminURL, f.ID), nil, nil); code != http.StatusOK {
			t.Fatalf("restart: HTTP %d", code)
		}
		if err := <-done; err != nil {
			t.Fatalf("produce across the kill and restart: %v", err)
		}
		if n := countValue(t, ctx, up.bootstrap, "f", p1, rec.Offset, before); n != 1 {
			t.Errorf("the record written before the kill is there %d times after the restart, want 1", n)
		}
		if n := countValue(t, ctx, up.bootstrap, "f", p1, rec.Offset, after); n != 1 {
			t.Errorf("the record retried across the kill is there %d times, want 1", n)
		}
	})

	// Held, released and replayed markers: the KIP-1228 late marker.
	for _, tc := range []struct {
		leader   int32
		version  string
		wantCode int16
	}{
		{1, "4.2", kerr.InvalidProducerEpoch.Code},
		{2, "4.1", 0},
	} {
		t.Run("late marker to a "+tc.version+" leader", func(t *testing.T) {
			p := partitionLedBy(t, ctx, probe, "late", 4, tc.leader)
			txnID := "late-" + tc.version
			cl := newClient(kgo.TransactionalID(txnID), kgo.TransactionTimeout(time.Minute))
			hold := addFault(t, up.adminURL, map[string]any{"kind": "hold_markers", "node": tc.leader})

			// Transaction 1 commits; its marker is held on the way.
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "late", Partition: p, Value: []byte("txn1")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			pid, _, err := cl.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var marker uint64
			waitFor(t, "the commit marker to be held", func() bool {
				for _, h := range listFaults(t, up.adminURL).HeldMarkers {
					for _, m := range h.Markers {
						if h.Held && h.Leader == tc.leader && m.ProducerID == pid && m.Committed {
							marker = h.ID
						}
					}
				}
				return marker != 0
			})
			var txn struct {
				State string `json:"state"`
			}
			faultHTTP(t, http.MethodGet, up.adminURL+"/v1/transactions/"+txnID, nil, &txn)
			if txn.State != "PrepareCommit" {
				t.Errorf("transaction 1 while its marker is held: %s, want PrepareCommit", txn.State)
			}
			// Released: the transaction completes.
			if code := faultHTTP(t, http.MethodDelete, fmt.Sprintf("%s/v1/faults/%d", up.adminURL, hold.ID), nil, nil); code != http.StatusOK {
				t.Fatalf("release: HTTP %d", code)
			}
			waitFor(t, "transaction 1 to complete", func() bool {
				faultHTTP(t, http.MethodGet, up.adminURL+"/v1/transactions/"+txnID, nil, &txn)
				return txn.State == "CompleteCommit"
			})

			// Transaction 2 is open on the same partition; the held copy
			// of transaction 1's marker arrives late.
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			rec := &kgo.Record{Topic: "late", Partition: p, Value: []byte("txn2")}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
			var replay struct {
				Version    int16 `json:"wtm_version"`
				Partitions []struct {
					Topic     string `json:"topic"`
					Partition int32  `json:"partition"`
					ErrorCode int16  `json:"error_code"`
				} `json:"partitions"`
			}
			if code := faultHTTP(t, http.MethodPost, fmt.Sprintf("%s/v1/faults/markers/%d/replay", up.adminURL, marker), nil, &replay); code != http.StatusOK {
				t.Fatalf("replay: HTTP %d", code)
			}
			if len(replay.Partitions) != 1 || replay.Partitions[0].Partition != p || replay.Partitions[0].ErrorCode != tc.wantCode {
				t.Errorf("replayed marker (v%d) answered %+v, want late-%d error %d", replay.Version, replay.Partitions, p, tc.wantCode)
			}
			lastStable := func() int64 {
				lso, err := kadm.NewClient(probe).ListCommittedOffsets(ctx, "late")
				if err == nil {
					err = lso.Error()
				}
				if err != nil {
					t.Fatal(err)
				}
				o, _ := lso.Lookup("late", p)
				return o.Offset
			}
			if tc.wantCode == 0 {
				// Applied: the stale commit ends transaction 2 at the
				// leader, exposing its record once the marker is durable
				// (an in-process marker may be answered when appended).
				waitFor(t, "the late commit to expose transaction 2's record", func() bool { return lastStable() > rec.Offset })
			} else if lso := lastStable(); lso > rec.Offset {
				// Refused: a rejected marker changes no state.
				t.Errorf("after the refused late marker the LSO is %d, past transaction 2's open record at %d", lso, rec.Offset)
			}
			if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
				t.Fatalf("abort transaction 2: %v", err)
			}
			// The history checker over the partition, read_committed: a
			// 4.2 leader refused the late marker, nothing is wrong; a 4.1
			// leader applied it, and the aborted transaction 2's record
			// stays visible, the one anomaly the late marker causes there.
			late := checker.Partition{Topic: "late", Partition: p}
			h := checker.History{Txns: []checker.Txn{
				{ID: txnID + "/1", Producer: txnID, Outcome: checker.Committed, Writes: []checker.Write{{Value: "txn1", Partition: late}}},
				{ID: txnID + "/2", Producer: txnID, Outcome: checker.Aborted, Writes: []checker.Write{{Value: "txn2", Partition: late}}},
			}}
			rep, err := checker.Check(h, readCommittedPartition(t, ctx, up.bootstrap, late))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("history checker: %s", rep.Summary())
			want := map[checker.Anomaly]int{}
			if tc.wantCode == 0 {
				want[checker.AbortedRead] = 1
			}
			for _, a := range checker.Anomalies {
				if rep.Counts[a] != want[a] {
					t.Errorf("history checker: %d %s, want %d\n%s", rep.Counts[a], a, want[a], rep.Table())
				}
			}
		})
	}
}

// readCommittedPartition reads one partition read_committed from its start
// until the fetches stay empty for two seconds (every transaction on it
// has ended).
func readCommittedPartition(t *testing.T, ctx context.Context, bootstrap string, p checker.Partition) checker.Reads {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.Topic: {p.Partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reads := checker.Reads{p: nil}
	for idle := 0; idle < 4; {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			reads[p] = append(reads[p], checker.Record{Offset: r.Offset, Value: string(r.Value)})
		})
		if n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return reads
}

// countValue counts the records of topic/partition from offset 0 up to
// and including last whose value is value (read uncommitted).
func countValue(t *testing.T, ctx context.Context, bootstrap, topic string, partition int32, last int64, value []byte) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			if bytes.Equal(r.Value, value) {
				n++
			}
			if r.Offset >= last {
				return n
			}
		}
	}
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFaultCLIWhenSecure: with `up --secure`, injecting a fault needs the
// admin token (HTTP 401 and a failing `txncoord fault add` without it);
// with it, `fault add`, `fault list -o json` and `fault clear` work, and
// bad flag values are usage errors naming the flag.
func TestFaultCLIWhenSecure(t *testing.T) {
	base := freePortRun(t, 3)
	dataDir := t.TempDir()
	up := startUp(t, "--secure", "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+2))
	defer up.stop(t)
	tokenBytes, err := os.ReadFile(filepath.Join(dataDir, "security", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	if code := faultHTTP(t, http.MethodPost, up.adminURL+"/v1/faults", map[string]any{"kind": "pause", "node": 1}, nil); code != http.StatusUnauthorized {
		t.Errorf("POST /v1/faults without the token: HTTP %d, want 401", code)
	}
	if _, stderr, code := runCLIEnv(t, nil, "fault", "add", "--kind", "pause", "--node", "1", "--admin", up.adminURL); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("fault add without the token: exit %d %q, want 1 naming HTTP 401", code, stderr)
	}
	stdout, stderr, code := runCLIEnv(t, nil, "fault", "add", "--kind", "error", "--node", "1", "--api-key", "0", "--error-code", "6", "--count", "2",
		"--admin", up.adminURL, "--token", token)
	if code != 0 || !strings.Contains(stdout, "Produce with NOT_LEADER_FOR_PARTITION (6)") {
		t.Fatalf("fault add with the token: exit %d %q %q", code, stdout, stderr)
	}
	stdout, _, code = runCLIEnv(t, nil, "fault", "list", "-o", "json", "--admin", up.adminURL, "--token", token)
	var l faultListJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &l) != nil || len(l.Faults) != 1 || l.Faults[0].Kind != "error" || l.Faults[0].Node != 1 {
		t.Errorf("fault list -o json: exit %d %q", code, stdout)
	}
	if _, _, code = runCLIEnv(t, nil, "fault", "clear", "--admin", up.adminURL, "--token", token); code != 0 {
		t.Errorf("fault clear: exit %d", code)
	}
	var after faultListJSON
	req, _ := http.NewRequest(http.MethodGet, up.adminURL+"/v1/faults", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&after)
	resp.Body.Close()
	if len(after.Faults) != 0 {
		t.Errorf("faults after fault clear: %+v", after.Faults)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "explode", "--node", "1"}, "explode"},
		{[]string{"--kind", "error", "--node", "1", "--error-code", "9999"}, "9999"},
		{[]string{"--kind", "delay_request", "--node", "1"}, "delay"},
		{[]string{"--kind", "pause", "--node", "77"}, "node 77"},
		{[]string{"--kind", "pause"}, "--node"},
	} {
		args := append([]string{"fault", "add", "--admin", up.adminURL, "--token", token}, bad.args...)
		if _, stderr, code := runCLIEnv(t, nil, args...); code == 0 || !strings.Contains(stderr, bad.want) {
			t.Errorf("fault add %v: exit %d %q, want a refusal naming %q", bad.args, code, stderr, bad.want)
		}
	}
}
