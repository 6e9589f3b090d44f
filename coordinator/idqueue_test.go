package coordinator

// TestIDQueueScenarios replays testdata/idqueue*.txt through
// internal/datadriven: requests go through stepWith with the decisions the
// handlers take, against an in-memory store whose log the scenario makes
// durable one write at a time, oldest first, or fails (fail-stop: every
// write not durable yet), as etcd raft's interaction tests drive a node.
// Commands:
//
//	open                                  a coordinator
//	init id=t                             InitProducerId (ids from 1)
//	register id=t pid=1 epoch=0 partitions=orders-0,orders-1
//	                                      a leader's AddPartitionsToTxn v5
//	endtxn id=t pid=1 epoch=0 commit|abort
//	                                      EndTxn v5
//	durable n=1                           the n oldest writes in the log become durable
//	fail                                  the log fails
//	markers-written id=t                  the last markers handed over for t are written
//	state id=t                            durable state and the writes in flight
//
// Every request is numbered (r1, r2, ...), every submitted write too (w1,
// ...); the output lists what the command submitted, which answers are
// final, and which markers were handed to the sender, at which write.
//
// go test ./coordinator -run TestIDQueueScenarios -args -rewrite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/internal/datadriven"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
	"github.com/txncoord/txncoord/txnlog"
)

// recordingMarkers is a MarkerQueue that only records what it is given.
type recordingMarkers struct {
	sent   chan markersender.Txn
	forgot chan string
}

func (m *recordingMarkers) Enqueue(txn markersender.Txn)                { m.sent <- txn }
func (m *recordingMarkers) Undelivered(string) []txncore.TopicPartition { return nil }
func (m *recordingMarkers) Forget(id string)                            { m.forgot <- id }

type queuedWrite struct {
	name string
	pos  durable.Pos
}

type request struct {
	name, what string
	d          *decision
	withPID    bool // the answer carries a producer id and epoch
}

// queueWorld is a scenario's coordinator and what is outstanding.
type queueWorld struct {
	t       *testing.T
	c       *Coordinator
	store   *observedStore
	markers *recordingMarkers
	nreq    int
	nwrite  int
	writes  []queuedWrite // submitted, not durable, oldest first
	waiting []request     // answers not yet final
	last    map[string]markersender.Txn
	gated   map[string]markersender.Txn // handed over before their Prepare was durable
}

func (w *queueWorld) open() string {
	w.store = newObservedStore()
	// Producer ids from 1.
	if err := txnlog.Apply(context.Background(), w.store.MemoryStore, txnlog.Batch{ProducerIDHighWater: 1}); err != nil {
		w.t.Fatal(err)
	}
	w.markers = &recordingMarkers{sent: make(chan markersender.Txn, 64), forgot: make(chan string, 64)}
	c, err := Open(Config{View: testView("127.0.0.1:1"), Store: w.store, Markers: w.markers, KafkaVersion: "4.2",
		Log: zerolog.Nop(), Now: func() time.Time { return time.UnixMilli(1000) },
		AbortScanInterval: time.Hour, PIDBlockSize: 1000})
	if err != nil {
		w.t.Fatal(err)
	}
	<-w.store.submitted // Open's epoch and first pid block
	w.store.Hold()
	w.c = c
	w.t.Cleanup(func() { c.Close() })
	return "opened"
}

// issue runs one decision through stepWith, as the handler does.
func (w *queueWorld) issue(what string, withPID bool, d *decision) string {
	w.nreq++
	name := fmt.Sprintf("r%d", w.nreq)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: decided %s", name, what, codeName(d.Err))
	switch {
	case d.own:
	case d.pos != 0:
		b.WriteString(", writes nothing, rests on " + w.writeName(d.pos))
	default:
		b.WriteString(", writes nothing")
	}
	w.waiting = append(w.waiting, request{name: name, what: what, d: d, withPID: withPID})
	w.collect(&b, d)
	return b.String()
}

func (w *queueWorld) writeName(pos durable.Pos) string {
	for _, q := range w.writes {
		if q.pos == pos {
			return q.name
		}
	}
	return "a durable write"
}

// collect records the write d submitted (if any), then reports final
// answers and markers handed over.
func (w *queueWorld) collect(b *strings.Builder, d *decision) {
	if d != nil && d.own {
		var batch txnlog.Batch
		select {
		case batch = <-w.store.submitted:
		default:
			w.t.Fatal("a decision with a write submitted nothing")
		}
		w.nwrite++
		q := queuedWrite{name: fmt.Sprintf("w%d", w.nwrite), pos: d.pos}
		w.writes = append(w.writes, q)
		fmt.Fprintf(b, "\n%s submitted: %s", q.name, fmtBatch(batch))
	}
	select {
	case extra := <-w.store.submitted:
		w.t.Fatalf("unexpected write %s", fmtBatch(extra))
	default:
	}
	w.report(b)
}

// report lists the answers that are final now and the markers handed
// over.
func (w *queueWorld) report(b *strings.Builder) {
	keep := w.waiting[:0]
	log := w.store.Log()
	for _, r := range w.waiting {
		if r.d.pos != 0 && log.Durable() < r.d.pos && log.Err() == nil {
			keep = append(keep, r)
			continue
		}
		o := r.d.wait(context.Background())
		fmt.Fprintf(b, "\n%s answered %s", r.name, codeName(o.Err))
		if o.Err == 0 && r.withPID {
			fmt.Fprintf(b, " pid=%d epoch=%d", o.ProducerID, o.ProducerEpoch)
		}
	}
	w.waiting = keep
	for id, m := range w.gated {
		switch {
		case log.Durable() >= m.Pos:
			fmt.Fprintf(b, "\nmarkers of %s may go to every leader (their Prepare is durable)", id)
			delete(w.gated, id)
		case log.Err() != nil:
			fmt.Fprintf(b, "\nmarkers of %s are never delivered (their Prepare failed)", id)
			delete(w.gated, id)
		}
	}
	for {
		select {
		case m := <-w.markers.sent:
			w.last[m.TransactionalID] = m
			at := ""
			if m.At != nil && m.At.Durable() < m.Pos {
				at = " at " + w.writeName(m.Pos) + " (until it is durable, only to leaders on the same log)"
				w.gated[m.TransactionalID] = m
			}
			fmt.Fprintf(b, "\nmarkers handed over: %s%s", fmtTxn(m), at)
		case id := <-w.markers.forgot:
			fmt.Fprintf(b, "\nmarkers of %s withdrawn", id)
		default:
			return
		}
	}
}

// release makes the n oldest writes durable, or with err nil fails the
// log, and reports what that settled.
func (w *queueWorld) release(b *strings.Builder, n int, fail bool) {
	if len(w.writes) == 0 {
		w.t.Fatal("no write in flight")
	}
	if fail {
		w.store.Fail(errors.New("injected write failure"))
		for i, q := range w.writes {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(b, "%s failed", q.name)
		}
		w.writes = nil
	} else {
		for i := range min(n, len(w.writes)) {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(b, "%s durable", w.writes[0].name)
			w.store.Release(1)
			w.writes = w.writes[1:]
			w.report(b)
		}
		return
	}
	w.report(b)
}

func fmtBatch(b txnlog.Batch) string {
	if len(b.Deletes) > 0 {
		return "delete " + strings.Join(b.Deletes, ",")
	}
	m := b.Puts[0]
	s := fmt.Sprintf("%s %s pid=%d epoch=%d partitions=%s", m.TransactionalID, m.State, m.ProducerID, m.ProducerEpoch, fmtTPs(m.Partitions))
	if c := m.Completing; c != nil {
		s += fmt.Sprintf(" completing=%s", fmtTPs(c.Partitions))
	}
	return s
}

func fmtTPs(tps []txncore.TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func fmtTxn(m markersender.Txn) string {
	result := "abort"
	if m.Commit {
		result = "commit"
	}
	tps := make([]string, len(m.Partitions))
	for i, tp := range m.Partitions {
		tps[i] = fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	}
	return fmt.Sprintf("%s %s pid=%d epoch=%d coordinator_epoch=%d partitions=[%s]", m.TransactionalID, result, m.ProducerID, m.ProducerEpoch,
		m.CoordinatorEpoch, strings.Join(tps, ","))
}

func parseTPs(t *testing.T, c *datadriven.Case) []txncore.TopicPartition {
	var out []txncore.TopicPartition
	for _, p := range strings.Split(c.Arg("partitions", ""), ",") {
		i := strings.LastIndex(p, "-")
		var n int32
		if _, err := fmt.Sscanf(p[i+1:], "%d", &n); i < 0 || err != nil {
			t.Fatalf("%s: bad partition %q", c.Pos, p)
		}
		out = append(out, txncore.TopicPartition{Topic: p[:i], Partition: n})
	}
	return out
}

func (w *queueWorld) run(t *testing.T, c *datadriven.Case) string {
	if c.Cmd != "open" && w.c == nil {
		t.Fatalf("%s: open first", c.Pos)
	}
	id := c.Arg("id", "t")
	var pid int64
	var epoch int16
	fmt.Sscanf(c.Arg("pid", "-1"), "%d", &pid)
	fmt.Sscanf(c.Arg("epoch", "-1"), "%d", &epoch)
	n := 1
	fmt.Sscanf(c.Arg("n", "1"), "%d", &n)
	switch c.Cmd {
	case "open":
		return w.open()
	case "init":
		d := w.c.step(id, true, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
			return txncore.InitProducerID(cur, pending, txncore.InitPIDRequest{TransactionalID: id, TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1},
				w.c.nowMs(), w.c.serverTV(), pids)
		})
		return w.issue("init "+id, true, d)
	case "register":
		tps := parseTPs(t, c)
		d := w.c.stepWith(id, stepOpts{speculate: true}, func(cur *Metadata, pending bool, _ PIDSource) Outcome {
			return txncore.AddPartitions(cur, pending, txncore.AddPartitionsRequest{ProducerID: pid, ProducerEpoch: epoch, Partitions: tps,
				ClientTV: 2, Overlap: true}, w.c.nowMs())
		})
		return w.issue(fmt.Sprintf("register %s %s", id, fmtTPs(tps)), false, d)
	case "endtxn":
		commit := c.Has("commit")
		if commit == c.Has("abort") {
			t.Fatalf("%s: commit or abort", c.Pos)
		}
		d := w.c.stepWith(id, stepOpts{speculate: true}, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
			return txncore.EndTxn(cur, pending, txncore.EndTxnRequest{ProducerID: pid, ProducerEpoch: epoch, Commit: commit, Version: 5}, w.c.nowMs(), pids)
		})
		what := "abort"
		if commit {
			what = "commit"
		}
		return w.issue(fmt.Sprintf("endtxn %s %s", id, what), true, d)
	case "durable", "fail":
		var b strings.Builder
		w.release(&b, n, c.Cmd == "fail")
		return b.String()
	case "markers-written":
		m, ok := w.last[id]
		if !ok {
			t.Fatalf("%s: no markers sent for %s", c.Pos, id)
		}
		w.nreq++
		name := fmt.Sprintf("r%d", w.nreq)
		var b strings.Builder
		d := w.c.markersWritten(m)
		if d == nil {
			fmt.Fprintf(&b, "%s markers written %s: ignored", name, id)
		} else {
			fmt.Fprintf(&b, "%s markers written %s: Complete decided", name, id)
		}
		w.collect(&b, d)
		return b.String()
	case "state":
		e := w.c.lock(id, false)
		if e == nil {
			return "no entry"
		}
		defer e.mu.Unlock()
		e.settle(w.c.storeLog)
		var b strings.Builder
		if e.md == nil {
			b.WriteString("durable: none")
		} else {
			fmt.Fprintf(&b, "durable: %s", fmtBatch(txnlog.Batch{Puts: []txnlog.TxnMetadata{*e.md}}))
		}
		fmt.Fprintf(&b, "\nin flight: %d", len(e.writes))
		if spec, _, speculated := e.view(true); speculated {
			fmt.Fprintf(&b, "\nspec: %s", fmtBatch(txnlog.Batch{Puts: []txnlog.TxnMetadata{*spec}}))
		}
		return b.String()
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func TestIDQueueScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/idqueue*.txt", func(t *testing.T, path string) {
		w := &queueWorld{t: t, last: map[string]markersender.Txn{}, gated: map[string]markersender.Txn{}}
		datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
			return w.run(t, c)
		})
	})
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return fmt.Sprint(code)
}
