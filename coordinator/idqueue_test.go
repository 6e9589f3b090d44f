package coordinator

// TestIDQueueScenarios replays testdata/idqueue*.txt through
// internal/datadriven: requests go through stepWith with the decisions the
// handlers take, against a store whose writes the scenario makes durable
// or fails one at a time, oldest first, as etcd raft's interaction tests
// drive a node. Commands:
//
//	open [early]                          a coordinator (early: EarlyMarkers)
//	init id=t                             InitProducerId (ids from 1)
//	register id=t pid=1 epoch=0 partitions=orders-0,orders-1
//	                                      a leader's AddPartitionsToTxn v5
//	endtxn id=t pid=1 epoch=0 commit|abort
//	                                      EndTxn v5
//	durable n=1                           the n oldest queued writes succeed
//	fail n=1                              the n oldest queued writes fail
//	markers-written id=t                  the last markers sent for t are written
//	state id=t                            durable state and the writes in flight
//
// Every request is numbered (r1, r2, ...), every queued write too (w1, ...);
// the output lists what the command queued, which answers are final, and
// which markers went to the sender.
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

func (m *recordingMarkers) Enqueue(txn markersender.Txn) { m.sent <- txn }
func (m *recordingMarkers) Forget(id string)             { m.forgot <- id }

type queuedWrite struct {
	name string
	mw   manualWrite
	d    *decision
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
	store   *manualStore
	markers *recordingMarkers
	early   bool
	nreq    int
	nwrite  int
	writes  []queuedWrite // queued, oldest first
	waiting []request     // answers not yet final
	last    map[string]markersender.Txn
}

func (w *queueWorld) open(early bool) string {
	mem := txnlog.NewMemory()
	// Producer ids from 1.
	if err := mem.Apply(context.Background(), txnlog.Batch{ProducerIDHighWater: 1}); err != nil {
		w.t.Fatal(err)
	}
	w.store = &manualStore{MemoryStore: mem, submits: make(chan manualWrite, 64)}
	w.markers = &recordingMarkers{sent: make(chan markersender.Txn, 64), forgot: make(chan string, 64)}
	w.early = early
	c, err := Open(Config{View: testView("127.0.0.1:1"), Store: w.store, Markers: w.markers, KafkaVersion: "4.2",
		EarlyMarkers: early, Log: zerolog.Nop(), Now: func() time.Time { return time.UnixMilli(1000) },
		AbortScanInterval: time.Hour, PIDBlockSize: 1000})
	if err != nil {
		w.t.Fatal(err)
	}
	w.c = c
	w.t.Cleanup(func() {
		// Release whatever is still queued, so Close does not wait.
		for _, q := range w.writes {
			q.mw.result <- errors.New("scenario over")
		}
		c.Close()
	})
	return fmt.Sprintf("opened (early markers: %v)", early)
}

// issue runs one decision through stepWith, as the handler does.
func (w *queueWorld) issue(what string, withPID bool, d *decision) string {
	w.nreq++
	name := fmt.Sprintf("r%d", w.nreq)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: decided %s", name, what, codeName(d.decided))
	switch {
	case d.own != nil:
	case d.after != nil:
		b.WriteString(", writes nothing, rests on " + w.writeName(d.after))
	default:
		b.WriteString(", writes nothing")
	}
	w.waiting = append(w.waiting, request{name: name, what: what, d: d, withPID: withPID})
	w.collect(&b, d)
	return b.String()
}

func (w *queueWorld) writeName(x *write) string {
	for _, q := range w.writes {
		if q.d.own == x {
			return q.name
		}
	}
	return "a finished write"
}

// collect records the write d queued (if any), then reports final answers
// and sent markers.
func (w *queueWorld) collect(b *strings.Builder, d *decision) {
	if d != nil && d.own != nil {
		var mw manualWrite
		select {
		case mw = <-w.store.submits:
		default:
			w.t.Fatal("a decision with a write submitted nothing")
		}
		w.nwrite++
		q := queuedWrite{name: fmt.Sprintf("w%d", w.nwrite), mw: mw, d: d}
		w.writes = append(w.writes, q)
		fmt.Fprintf(b, "\n%s queued: %s", q.name, fmtBatch(mw.batch))
	}
	select {
	case extra := <-w.store.submits:
		w.t.Fatalf("unexpected write %s", fmtBatch(extra.batch))
	default:
	}
	w.report(b)
}

// report lists the answers that are final now and the markers sent.
func (w *queueWorld) report(b *strings.Builder) {
	keep := w.waiting[:0]
	for _, r := range w.waiting {
		if !ready(r.d) {
			keep = append(keep, r)
			continue
		}
		o := r.d.wait()
		fmt.Fprintf(b, "\n%s answered %s", r.name, codeName(o.Err))
		if o.Err == 0 && r.withPID {
			fmt.Fprintf(b, " pid=%d epoch=%d", o.ProducerID, o.ProducerEpoch)
		}
	}
	w.waiting = keep
	for {
		select {
		case m := <-w.markers.sent:
			w.last[m.TransactionalID] = m
			gate := ""
			if m.Durable != nil {
				gate = " (gated on the Prepare's write)"
			}
			fmt.Fprintf(b, "\nmarkers sent: %s%s", fmtTxn(m), gate)
		case id := <-w.markers.forgot:
			fmt.Fprintf(b, "\nmarkers of %s withdrawn", id)
		default:
			return
		}
	}
}

func ready(d *decision) bool {
	select {
	case <-d.done:
	default:
		return false
	}
	if d.after != nil {
		select {
		case <-d.after.done:
		default:
			return false
		}
	}
	return true
}

// finishOldest makes the oldest queued write durable (err nil) or fails it,
// and waits until its decision has released the answer and the markers.
func (w *queueWorld) finishOldest(b *strings.Builder, err error) {
	if len(w.writes) == 0 {
		w.t.Fatal("no write queued")
	}
	q := w.writes[0]
	w.writes = w.writes[1:]
	if err == nil {
		w.store.commit(q.mw)
		fmt.Fprintf(b, "%s durable", q.name)
	} else {
		q.mw.result <- err
		fmt.Fprintf(b, "%s failed", q.name)
	}
	<-q.d.done
	if q.d.asDecided.Markers != nil && w.early {
		if m, ok := w.last[q.d.asDecided.Markers.TransactionalID]; ok && m.Durable != nil {
			select {
			case <-m.Durable:
				fmt.Fprintf(b, "\nmarkers of %s released to every leader (Prepare durable)", m.TransactionalID)
			default:
				fmt.Fprintf(b, "\nmarkers of %s stay gated (the Prepare is not durable)", m.TransactionalID)
			}
		}
	}
	if err == nil && q.d.asDecided.Markers != nil && !w.early {
		// Sent right after the answer is released.
		select {
		case m := <-w.markers.sent:
			w.markers.sent <- m // report reads it
		case <-time.After(10 * time.Second): // a failure bound
			w.t.Fatalf("%s: no markers sent after the Prepare was durable", q.name)
		}
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
		return w.open(c.Has("early"))
	case "init":
		d := w.c.step(id, true, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
			return txncore.InitProducerID(cur, pending, txncore.InitPIDRequest{TransactionalID: id, TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1},
				w.c.nowMs(), w.c.serverTV(), pids)
		})
		return w.issue("init "+id, true, d)
	case "register":
		tps := parseTPs(t, c)
		d := w.c.stepWith(id, false, true, func(cur *Metadata, pending bool, _ PIDSource) Outcome {
			return txncore.AddPartitions(cur, pending, txncore.AddPartitionsRequest{ProducerID: pid, ProducerEpoch: epoch, Partitions: tps,
				ClientTV: 2, Overlap: true}, w.c.nowMs())
		})
		return w.issue(fmt.Sprintf("register %s %s", id, fmtTPs(tps)), false, d)
	case "endtxn":
		commit := c.Has("commit")
		if commit == c.Has("abort") {
			t.Fatalf("%s: commit or abort", c.Pos)
		}
		d := w.c.stepWith(id, false, true, func(cur *Metadata, pending bool, pids PIDSource) Outcome {
			return txncore.EndTxn(cur, pending, txncore.EndTxnRequest{ProducerID: pid, ProducerEpoch: epoch, Commit: commit, Version: 5}, w.c.nowMs(), pids)
		})
		what := "abort"
		if commit {
			what = "commit"
		}
		return w.issue(fmt.Sprintf("endtxn %s %s", id, what), true, d)
	case "durable", "fail":
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString("\n")
			}
			var err error
			if c.Cmd == "fail" {
				err = errors.New("injected write failure")
			}
			w.finishOldest(&b, err)
		}
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
		var b strings.Builder
		if e.md == nil {
			b.WriteString("durable: none")
		} else {
			fmt.Fprintf(&b, "durable: %s", fmtBatch(txnlog.Batch{Puts: []txnlog.TxnMetadata{*e.md}}))
		}
		fmt.Fprintf(&b, "\nin flight: %d pending=%v", e.inflight, e.pending)
		if e.spec != nil {
			fmt.Fprintf(&b, "\nspec: %s", fmtBatch(txnlog.Batch{Puts: []txnlog.TxnMetadata{*e.spec}}))
		}
		return b.String()
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func TestIDQueueScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/idqueue*.txt", func(t *testing.T, path string) {
		w := &queueWorld{t: t, last: map[string]markersender.Txn{}}
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

// gatedApplyStore is a store without Submit whose Apply calls wait for the
// test, one release per call, and report when they start.
type gatedApplyStore struct {
	*txnlog.MemoryStore
	started chan string
	release chan struct{}
}

func (s *gatedApplyStore) Apply(ctx context.Context, b txnlog.Batch) error {
	id := "?"
	if len(b.Puts) > 0 {
		id = b.Puts[0].TransactionalID
	}
	s.started <- id
	<-s.release
	return s.MemoryStore.Apply(ctx, b)
}

// TestOrderedApplierOrdersPerID: the adapter that gives a store without
// Submit the coordinator's one write path applies an id's second write
// only after its first ended, while another id's write runs meanwhile.
func TestOrderedApplierOrdersPerID(t *testing.T) {
	s := &gatedApplyStore{MemoryStore: txnlog.NewMemory(), started: make(chan string, 8), release: make(chan struct{})}
	submit, native := storeSubmit(context.Background(), s)
	if native {
		t.Fatal("a store without Submit taken as a Submitter")
	}
	put := func(id string) txnlog.Batch { return txnlog.Batch{Puts: []txnlog.TxnMetadata{{TransactionalID: id}}} }
	a1 := submit("a", put("a"))
	a2 := submit("a", put("a"))
	b1 := submit("b", put("b"))
	got := map[string]int{}
	for range 2 {
		got[<-s.started]++
	}
	if got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("started %v, want a's first write and b's", got)
	}
	select {
	case id := <-s.started:
		t.Fatalf("%s's write started before a's first ended", id)
	case <-time.After(50 * time.Millisecond): // nothing else may start; a short look
	}
	s.release <- struct{}{}
	s.release <- struct{}{}
	if id := <-s.started; id != "a" {
		t.Fatalf("started %s, want a's second write", id)
	}
	s.release <- struct{}{}
	for _, ch := range []<-chan error{a1, a2, b1} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}
