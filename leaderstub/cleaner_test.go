package leaderstub

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/txncoord/txncoord/topicconfig"
)

// TestCleanerDataDriven runs testdata/cleaner/scenarios.txt against planClean: a
// partition log built command by command, cleaned, and printed.
//
//	config name=value ...             the topic's configs (topicconfig.Resolve), from Kafka's defaults
//	append ts=T recs=k=v,k=~ [pid=N] [txn] [size=B]   a data batch (~ is a tombstone, a null value)
//	commit|abort pid=N ts=T           a transaction marker
//	expire pid=N                      the producer has no state any more
//	clean now=T [limit=X]             plan a clean, apply it, print the plan and the log
//	log                               print the log
func TestCleanerDataDriven(t *testing.T) {
	runDataDriven(t, "testdata/cleaner/scenarios.txt", func(t *testing.T, d *ddCmd) string {
		return cleanerFix.run(t, d)
	})
}

// cleanerFixture is one partition as the cleaner sees it, with the values
// of its records for printing.
type cleanerFixture struct {
	vals    topicconfig.Values
	batches []cleanBatch
	values  map[int64]string // offset → value ("~": tombstone)
	aborted []abortedTxn
	open    map[int64]int64 // pid → first offset of its open transaction
	active  map[int64]bool
	next    int64
	dirty   int64
	horizon int64
}

var cleanerFix *cleanerFixture

func newCleanerFixture() *cleanerFixture {
	return &cleanerFixture{vals: topicconfig.Resolve(map[string]string{"cleanup.policy": "compact"}, nil),
		values: map[int64]string{}, open: map[int64]int64{}, active: map[int64]bool{}, horizon: -1}
}

func (f *cleanerFixture) lso() int64 {
	lso := f.next
	for _, off := range f.open {
		lso = min(lso, off)
	}
	return lso
}

func (f *cleanerFixture) run(t *testing.T, d *ddCmd) string {
	if f == nil || d.Name == "reset" {
		cleanerFix = newCleanerFixture()
		f = cleanerFix
		if d.Name == "reset" {
			return "ok"
		}
	}
	switch d.Name {
	case "config":
		cfg := map[string]string{"cleanup.policy": "compact"}
		for k, v := range d.Args {
			cfg[k] = v
		}
		if err := topicconfig.ValidateTopicConfigs(ptrs(cfg)); err != nil {
			t.Fatalf("%s: %v", d.Pos, err)
		}
		f.vals = topicconfig.Resolve(cfg, nil)
		return "ok"
	case "append":
		pid := d.int(t, "pid", -1)
		b := cleanBatch{Base: f.next, ProducerID: pid, Transactional: d.has("txn"), MaxTimestamp: d.int(t, "ts", 0)}
		for _, kv := range strings.Split(d.str("recs", ""), ",") {
			k, v, _ := strings.Cut(kv, "=")
			b.Records = append(b.Records, cleanRecord{Offset: f.next, Key: k, Tombstone: v == "~"})
			f.values[f.next] = v
			f.next++
		}
		b.Last, b.Size = f.next-1, d.int(t, "size", 10+10*int64(len(b.Records)))
		if pid >= 0 {
			f.active[pid] = true
		}
		if _, ok := f.open[pid]; b.Transactional && !ok {
			f.open[pid] = b.Base
		}
		f.batches = append(f.batches, b)
		return fmt.Sprintf("%d-%d", b.Base, b.Last)
	case "commit", "abort":
		pid := d.int(t, "pid", -1)
		first, ok := f.open[pid]
		if !ok {
			t.Fatalf("%s: producer %d has no open transaction", d.Pos, pid)
		}
		delete(f.open, pid)
		b := cleanBatch{Base: f.next, Last: f.next, Size: 10, ProducerID: pid, Control: true, Transactional: true,
			Commit: d.Name == "commit", MaxTimestamp: d.int(t, "ts", 0)}
		if !b.Commit {
			f.aborted = append(f.aborted, abortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: b.Base, LastStableOffset: f.lso()})
		}
		f.next++
		f.batches = append(f.batches, b)
		return fmt.Sprintf("%d", b.Base)
	case "expire":
		delete(f.active, d.int(t, "pid", -1))
		return "ok"
	case "clean":
		plan, err := planClean(&cleanInput{Batches: f.batches, Aborted: f.aborted, FirstDirty: f.dirty, LSO: f.lso(),
			Limit: d.int(t, "limit", -1), Now: d.int(t, "now", 0), Vals: f.vals, Active: f.active, Horizon: f.horizon})
		if err != nil {
			t.Fatalf("%s: %v", d.Pos, err)
		}
		f.apply(plan)
		return fmt.Sprintf("end=%d ratio=%.2f run=%t removed=%d dropped=%d horizon=%d\n%s", plan.End, plan.DirtyRatio, plan.Run,
			plan.RecordsRemoved, plan.BatchesDropped, plan.Horizon, f.print())
	case "log":
		return f.print()
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Name)
	return ""
}

func ptrs(m map[string]string) map[string]*string {
	out := map[string]*string{}
	for k, v := range m {
		out[k] = &v
	}
	return out
}

// apply does what the leader does with a plan.
func (f *cleanerFixture) apply(plan cleanPlan) {
	if !plan.Run {
		return
	}
	drop := map[int]bool{}
	for _, a := range plan.Actions {
		if a.Drop {
			drop[a.Index] = true
			continue
		}
		b := &f.batches[a.Index]
		b.Records = slices.DeleteFunc(b.Records, func(r cleanRecord) bool { return !slices.Contains(a.Keep, r.Offset) })
		b.Size = 10 + 10*int64(len(b.Records))
	}
	kept := f.batches[:0]
	for i, b := range f.batches {
		if !drop[i] {
			kept = append(kept, b)
		}
	}
	f.batches = kept
	f.aborted = slices.DeleteFunc(f.aborted, func(a abortedTxn) bool { return slices.Contains(plan.DroppedAborted, a.LastOffset) })
	f.dirty = plan.End
	f.horizon = plan.Horizon
}

func (f *cleanerFixture) print() string {
	var sb strings.Builder
	for _, b := range f.batches {
		pid := ""
		if b.ProducerID >= 0 {
			pid = fmt.Sprintf(" pid=%d", b.ProducerID)
		}
		switch {
		case b.Control && b.Commit:
			fmt.Fprintf(&sb, "%d COMMIT%s\n", b.Base, pid)
			continue
		case b.Control:
			fmt.Fprintf(&sb, "%d ABORT%s\n", b.Base, pid)
			continue
		}
		txn := ""
		if b.Transactional {
			txn = " txn"
		}
		var recs []string
		for _, r := range b.Records {
			recs = append(recs, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, f.values[r.Offset]))
		}
		fmt.Fprintf(&sb, "%d-%d%s%s [%s]\n", b.Base, b.Last, pid, txn, strings.Join(recs, " "))
	}
	for _, a := range f.aborted {
		fmt.Fprintf(&sb, "aborted pid=%d first=%d last=%d\n", a.ProducerID, a.FirstOffset, a.LastOffset)
	}
	fmt.Fprintf(&sb, "lso=%d", f.lso())
	return sb.String()
}
