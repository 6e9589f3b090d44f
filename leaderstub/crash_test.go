package leaderstub

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"

	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/wire"
)

// TestMain re-executes the test binary as a leader process when
// TXNCOORD_TEST_CHILD=leader, so the crash test can SIGKILL a real process.
func TestMain(m *testing.M) {
	if os.Getenv("TXNCOORD_TEST_CHILD") == "leader" {
		runChildLeader()
		return
	}
	os.Exit(m.Run())
}

// runChildLeader serves one leader on TXNCOORD_TEST_ADDR with its store in
// TXNCOORD_TEST_DIR and the coordinator twin in-process, prints "ready", and
// runs until killed.
func runChildLeader() {
	addr, dir := os.Getenv("TXNCOORD_TEST_ADDR"), os.Getenv("TXNCOORD_TEST_DIR")
	view := cluster.NewView(testFile([]cluster.Node{{NodeID: 1, Addr: addr, KafkaVersion: "4.2"}}, map[string]int32{"t": 1}))
	cfg := Config{NodeID: 1, KafkaVersion: "4.2", View: view, DataDir: dir, Coordinator: newTwin(),
		Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel)}
	if os.Getenv("TXNCOORD_TEST_COMPACT") != "" {
		// A compacted t cleaned every 2 ms (TestCrashDuringCleaning).
		t, _ := view.Topic("t")
		view.SetTopic(t, map[string]string{"cleanup.policy": "compact", "segment.ms": "1",
			"min.cleanable.dirty.ratio": "0", "delete.retention.ms": "0"})
		cfg.CleanerBackoff = 2 * time.Millisecond
	}
	l, err := Open(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reg := wire.NewRegistry()
	view.RegisterMetadata(reg)
	view.RegisterFindCoordinator(reg)
	l.Register(reg)
	prof, _ := negotiation.Profile("4.2")
	if _, err := wire.Start(wire.Config{Addr: addr, Registry: reg, Profile: prof}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	l.Close()
}

type childLeader struct {
	cmd *exec.Cmd
}

func startChild(t *testing.T, addr, dir string, env ...string) *childLeader {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TXNCOORD_TEST_CHILD=leader", "TXNCOORD_TEST_ADDR="+addr, "TXNCOORD_TEST_DIR="+dir)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && strings.TrimSpace(sc.Text()) == "ready"
		ready <- ok
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("child leader did not start")
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("child leader did not print ready")
	}
	return &childLeader{cmd: cmd}
}

func (c *childLeader) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
}

// TestCrashRecovery: idempotent producers write concurrently to a leader
// process that is SIGKILLed mid-stream; after a restart on the same data
// dir every acknowledged record is readable at its acknowledged offset, the
// producers' epochs and sequences are as acknowledged (the next batch in
// sequence is accepted, a retry of the last acked batch is recognised as a
// duplicate), and an open transaction still holds the LSO.
func TestCrashRecovery(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	child := startChild(t, addr, dir)
	defer func() { child.kill() }()

	// An open transaction first, so the LSO is pinned at its offset.
	cl, err := wire.Dial(context.Background(), addr, "crash")
	if err != nil {
		t.Fatal(err)
	}
	txnID := "crash-txn"
	resp := do[*kmsg.ProduceResponse](t, cl, produceReq("t", 0, &txnID, -1,
		testBatch{pid: 9000, epoch: 3, seq: 0, txn: true, ts: 1, payload: "open"}.bytes()), 12)
	txnOffset := resp.Topics[0].Partitions[0].BaseOffset
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("transactional produce failed")
	}
	cl.Close()

	type acked struct {
		offset int64
		value  string
		seq    int32
	}
	const producers = 4
	var mu sync.Mutex
	ackedBy := make([][]acked, producers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	total := 0
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cl, err := wire.Dial(context.Background(), addr, "crash")
			if err != nil {
				return
			}
			defer cl.Close()
			for seq := int32(0); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				value := fmt.Sprintf("p%d", p)
				req := produceReq("t", 0, nil, -1, testBatch{pid: int64(100 + p), epoch: 0, seq: seq, ts: 1, payload: value}.bytes())
				req.SetVersion(9)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				raw, err := cl.Do(ctx, req)
				cancel()
				if err != nil {
					return // the leader died
				}
				rp := raw.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
				if rp.ErrorCode != 0 {
					t.Errorf("producer %d seq %d: %s", p, seq, codeName(rp.ErrorCode))
					return
				}
				mu.Lock()
				ackedBy[p] = append(ackedBy[p], acked{offset: rp.BaseOffset, value: value + "-0", seq: seq})
				total++
				mu.Unlock()
			}
		}(p)
	}
	waitFor(t, "200 acknowledged writes", func() bool { mu.Lock(); defer mu.Unlock(); return total >= 200 })
	child.kill()
	close(stop)
	wg.Wait()

	child = startChild(t, addr, dir)
	cl, err = wire.Dial(context.Background(), addr, "crash")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Every acknowledged record at its offset.
	values := fetchValues(t, cl)
	n := 0
	for p := range ackedBy {
		for _, a := range ackedBy[p] {
			if values[a.offset] != a.value {
				t.Fatalf("acked record of producer %d seq %d at offset %d: found %q", p, a.seq, a.offset, values[a.offset])
			}
			n++
		}
	}
	t.Logf("%d acknowledged records all recovered; log holds %d records", n, len(values))

	// Producer state: at least the acked sequence (an unacked write may
	// also have become durable); the next sequence after the recovered
	// one is accepted and a retry of the last recovered batch is a
	// duplicate answered with its offset.
	dp := do[*kmsg.DescribeProducersResponse](t, cl, describeReq("t", 0), 0)
	state := map[int64]kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
	for _, ap := range dp.Topics[0].Partitions[0].ActiveProducers {
		state[ap.ProducerID] = ap
	}
	if s := state[9000]; s.CurrentTxnStartOffset != txnOffset || s.ProducerEpoch != 3 {
		t.Fatalf("transactional producer after restart: %+v, want txn start %d epoch 3", s, txnOffset)
	}
	for p := range ackedBy {
		if len(ackedBy[p]) == 0 {
			continue
		}
		last := ackedBy[p][len(ackedBy[p])-1]
		s := state[int64(100+p)]
		if s.LastSequence < last.seq {
			t.Fatalf("producer %d: recovered last sequence %d < acked %d", p, s.LastSequence, last.seq)
		}
		if s.LastSequence == last.seq {
			retry := do[*kmsg.ProduceResponse](t, cl, produceReq("t", 0, nil, -1,
				testBatch{pid: int64(100 + p), epoch: 0, seq: last.seq, ts: 1, payload: fmt.Sprintf("p%d", p)}.bytes()), 9)
			if rp := retry.Topics[0].Partitions[0]; rp.ErrorCode != 0 || rp.BaseOffset != last.offset {
				t.Fatalf("producer %d: retry of the last acked batch → %s offset %d, want duplicate at %d", p, codeName(rp.ErrorCode), rp.BaseOffset, last.offset)
			}
		}
		next := do[*kmsg.ProduceResponse](t, cl, produceReq("t", 0, nil, -1,
			testBatch{pid: int64(100 + p), epoch: 0, seq: s.LastSequence + 1, ts: 1, payload: "next"}.bytes()), 9)
		if code := next.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("producer %d: next sequence after recovery: %s", p, codeName(code))
		}
	}
	lo := do[*kmsg.ListOffsetsResponse](t, cl, listOffsetsReq("t", 0, -1, true), 11)
	if lso := lo.Topics[0].Partitions[0].Offset; lso != txnOffset {
		t.Fatalf("LSO after restart = %d, want %d (the open txn)", lso, txnOffset)
	}
}

// fetchValues reads the whole partition (read_uncommitted) over the wire
// and maps offset → value of every data record.
func fetchValues(t *testing.T, cl *wire.Client) map[int64]string {
	t.Helper()
	values := map[int64]string{}
	for offset := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := do[*kmsg.FetchResponse](t, cl, req, 11)
		part := resp.Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			t.Fatalf("fetch at %d: %s", offset, codeName(part.ErrorCode))
		}
		raw := part.RecordBatches
		if len(raw) == 0 {
			return values
		}
		for len(raw) > 0 {
			var batch kmsg.RecordBatch
			h, n, err := parseHeader(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := batch.ReadFrom(raw[:n]); err != nil {
				t.Fatal(err)
			}
			base := int64(binary.BigEndian.Uint64(raw))
			if !h.control() {
				recs := batch.Records
				for i := int32(0); i < h.RecordCount; i++ {
					var rec kmsg.Record
					length, used := binary.Varint(recs)
					if err := rec.ReadFrom(recs[:used+int(length)]); err != nil {
						t.Fatal(err)
					}
					values[base+int64(rec.OffsetDelta)] = string(rec.Value)
					recs = recs[used+int(length):]
				}
			}
			offset = base + int64(h.LastOffsetDelta) + 1
			raw = raw[n:]
		}
	}
}
