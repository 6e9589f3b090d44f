package coordinator

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
	"github.com/txncoord/txncoord/wire"
)

// childEnv makes the test binary run a coordinator instead of the tests,
// so the crash test has a real process to SIGKILL.
const childEnv = "TXNCOORD_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "coordinator" {
		runChildCoordinator(os.Getenv("TXNCOORD_TEST_DB"))
		return
	}
	os.Exit(m.Run())
}

// neverMarkers accepts markers and never completes them: the transactions
// stay between Prepare and Complete until the process dies.
type neverMarkers struct{}

func (neverMarkers) Enqueue(markersender.Txn)                    {}
func (neverMarkers) Undelivered(string) []txncore.TopicPartition { return nil }
func (neverMarkers) Forget(string)                               {}

// runChildCoordinator serves a bbolt-backed coordinator on a free port,
// prints "ready addr=ADDR epoch=N" and runs until killed.
func runChildCoordinator(dbPath string) {
	store, err := txnlog.OpenBolt(dbPath, txnlog.BoltOptions{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	view := testView("127.0.0.1:1")
	c, err := Open(Config{View: view, Store: store, Markers: neverMarkers{}, Log: zerolog.Nop()})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	reg := wire.NewRegistry()
	c.Register(reg)
	s, err := wire.Start(wire.Config{Addr: "127.0.0.1:0", Registry: reg})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Printf("ready addr=%s epoch=%d\n", s.Addr(), c.Epoch())
	select {}
}

func doWire(t *testing.T, cl *wire.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// SIGKILL between Prepare and Complete: every acknowledged EndTxn survives,
// the restarted coordinator has a higher epoch, resends every Prepare*'s
// markers with it, and completes them.
func TestCrashBetweenPrepareAndComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("re-execs the test binary")
	}
	dbPath := filepath.Join(t.TempDir(), "txnlog.db")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=coordinator", "TXNCOORD_TEST_DB="+dbPath)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	var addr string
	var childEpoch int32
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "ready addr=%s epoch=%d", &addr, &childEpoch); err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	cl, err := wire.Dial(context.Background(), addr, "crash-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Acknowledged work: 10 TV1 commits and 10 TV2 aborts, all answered
	// (so their Prepare is durable), none completed.
	type acked struct {
		id     string
		pid    int64
		epoch  int16 // marker epoch
		commit bool
		tv     int8
	}
	var want []acked
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("crash-%02d", i)
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.SetVersion(4)
		ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = &id, 60000, -1, -1
		ipr := doWire(t, cl, ip).(*kmsg.InitProducerIDResponse)
		if ipr.ErrorCode != 0 {
			t.Fatalf("%s InitProducerId: %d", id, ipr.ErrorCode)
		}
		tv2 := i%2 == 1
		var addErr int16
		if tv2 {
			resp := doWire(t, cl, leaderAddRequest(id, ipr.ProducerID, ipr.ProducerEpoch, "orders", int32(i%4))).(*kmsg.AddPartitionsToTxnResponse)
			addErr = firstV4Error(resp)
		} else {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.SetVersion(3)
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, ipr.ProducerID, ipr.ProducerEpoch
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = "orders", []int32{int32(i % 4)}
			req.Topics = append(req.Topics, rt)
			addErr = doWire(t, cl, req).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
		}
		if addErr != 0 {
			t.Fatalf("%s AddPartitionsToTxn: %d", id, addErr)
		}
		et := kmsg.NewPtrEndTxnRequest()
		et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = id, ipr.ProducerID, ipr.ProducerEpoch, !tv2
		et.SetVersion(4)
		a := acked{id: id, pid: ipr.ProducerID, epoch: ipr.ProducerEpoch, commit: !tv2}
		if tv2 {
			et.SetVersion(5)
			a.epoch, a.tv = ipr.ProducerEpoch+1, 2
		}
		etr := doWire(t, cl, et).(*kmsg.EndTxnResponse)
		if etr.ErrorCode != 0 {
			t.Fatalf("%s EndTxn: %d", id, etr.ErrorCode)
		}
		want = append(want, a)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	killed = true

	store, err := txnlog.OpenBolt(dbPath, txnlog.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, fm := openTest(t, testView("127.0.0.1:1"), store, false)
	if c.Epoch() <= childEpoch {
		t.Fatalf("coordinator epoch %d after restart, child had %d", c.Epoch(), childEpoch)
	}
	resent := map[string]markersender.Txn{}
	for _, m := range fm.snapshot() {
		resent[m.TransactionalID] = m
	}
	if len(resent) != len(want) {
		t.Fatalf("%d transactions resent, want %d", len(resent), len(want))
	}
	for _, w := range want {
		m, ok := resent[w.id]
		if !ok || m.ProducerID != w.pid || m.ProducerEpoch != w.epoch || m.Commit != w.commit ||
			m.TransactionVersion != w.tv || m.CoordinatorEpoch != c.Epoch() || len(m.Partitions) != 1 {
			t.Fatalf("%s: resent %+v, want %+v with coordinator epoch %d", w.id, m, w, c.Epoch())
		}
	}
	// Producer ids handed out before the crash are never reused.
	newPID, _ := initPID(t, c, "after-restart")
	for _, w := range want {
		if newPID <= w.pid {
			t.Fatalf("producer id %d after restart, the child handed out %d", newPID, w.pid)
		}
	}
	// The marker sender finishes; every transaction completes durably.
	for _, m := range fm.snapshot() {
		c.MarkersWritten(m)
	}
	for _, w := range want {
		state := txnlog.CompleteAbort
		if w.commit {
			state = txnlog.CompleteCommit
		}
		waitState(t, c, w.id, state)
	}
	c.Close()
	loaded, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if m := loaded.Txns[w.id]; m.State != txnlog.CompleteCommit && m.State != txnlog.CompleteAbort {
			t.Fatalf("%s stored as %s after completion", w.id, m.State)
		}
	}
	if loaded.CoordinatorEpoch != c.Epoch() {
		t.Fatalf("stored coordinator epoch %d, want %d", loaded.CoordinatorEpoch, c.Epoch())
	}
}
