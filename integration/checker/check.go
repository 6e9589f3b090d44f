package checker

import (
	"fmt"
	"sort"
	"strings"
)

// Anomaly is a kind of violation the checker detects.
type Anomaly string

const (
	// AbortedRead: a value of an aborted transaction is visible (G1a).
	AbortedRead Anomaly = "aborted-read"
	// LostWrite: a value of an acknowledged-committed transaction is
	// not visible.
	LostWrite Anomaly = "lost-write"
	// Duplicate: one value is visible at two or more offsets.
	Duplicate Anomaly = "duplicate"
	// TornTxn: only some values of a committed or unknown transaction
	// are visible (counted once per transaction).
	TornTxn Anomaly = "torn-txn"
	// PrecommittedRead: a value of a transaction the client never ended
	// is visible.
	PrecommittedRead Anomaly = "precommitted-read"
	// Unexpected: a visible value that no transaction wrote.
	Unexpected Anomaly = "unexpected-value"
	// Misplaced: a value visible in a partition it was not written to.
	Misplaced Anomaly = "misplaced-value"
	// Reordered: two values one producer wrote to one partition are
	// visible in the opposite order (Kafka's transactions_test checks
	// per-partition order).
	Reordered Anomaly = "reordered"
	// InconsistentOffset: the read has one offset twice, or offsets that
	// go backwards (a reader or log bug).
	InconsistentOffset Anomaly = "inconsistent-offset"
)

// Anomalies lists every kind in report order.
var Anomalies = []Anomaly{AbortedRead, LostWrite, Duplicate, TornTxn, PrecommittedRead, Unexpected, Misplaced, Reordered, InconsistentOffset}

// MaxExamples bounds the examples kept per anomaly kind.
const MaxExamples = 5

// Totals are the sizes of the history and the read.
type Totals struct {
	Txns, TxnsCommitted, TxnsAborted, TxnsUnknown, TxnsOpen           int
	Values, ValuesCommitted, ValuesAborted, ValuesUnknown, ValuesOpen int
	// UnknownVisible and UnknownInvisible count unknown-outcome
	// transactions that resolved as committed (all values visible) and
	// as aborted (none visible); torn ones count as TornTxn.
	UnknownVisible, UnknownInvisible int
	// ValuesRead counts visible records, duplicates included.
	ValuesRead int
	Partitions int
}

// Report is the checker's verdict.
type Report struct {
	Totals
	Counts   map[Anomaly]int
	Examples map[Anomaly][]string
}

// Anomalies is the total number of anomalies of every kind; zero means the
// history is consistent.
func (r *Report) Anomalies() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

func (r *Report) add(kind Anomaly, format string, args ...any) {
	r.Counts[kind]++
	if len(r.Examples[kind]) < MaxExamples {
		r.Examples[kind] = append(r.Examples[kind], fmt.Sprintf(format, args...))
	}
}

// written is where and in which transaction a value was written.
type written struct {
	txn   *Txn
	write Write
	order int // position among its producer's writes to that partition
}

// seen is where a value was read.
type seen struct {
	partition Partition
	offset    int64
}

// Check compares a history with the final read. It fails only when the
// history itself is unusable (a value written twice or empty), which is a
// workload bug, not a cluster anomaly.
func Check(h History, reads Reads) (*Report, error) {
	r := &Report{Counts: make(map[Anomaly]int), Examples: make(map[Anomaly][]string)}
	for _, k := range Anomalies {
		r.Counts[k] = 0
	}

	values := make(map[string]written)
	type producerPartition struct {
		producer  string
		partition Partition
	}
	nextOrder := make(map[producerPartition]int)
	for i := range h.Txns {
		txn := &h.Txns[i]
		r.Txns++
		switch txn.Outcome {
		case Committed:
			r.TxnsCommitted++
			r.ValuesCommitted += len(txn.Writes)
		case Aborted:
			r.TxnsAborted++
			r.ValuesAborted += len(txn.Writes)
		case Unknown:
			r.TxnsUnknown++
			r.ValuesUnknown += len(txn.Writes)
		default:
			r.TxnsOpen++
			r.ValuesOpen += len(txn.Writes)
		}
		for _, w := range txn.Writes {
			r.Values++
			if w.Value == "" {
				return nil, fmt.Errorf("checker: txn %s wrote an empty value", txn.ID)
			}
			if prev, dup := values[w.Value]; dup {
				// The checker could not tell the two writes apart.
				return nil, fmt.Errorf("checker: value %q written twice (txns %s and %s)", w.Value, prev.txn.ID, txn.ID)
			}
			pp := producerPartition{txn.Producer, w.Partition}
			values[w.Value] = written{txn: txn, write: w, order: nextOrder[pp]}
			nextOrder[pp]++
		}
	}

	// Walk the read in a stable order so that examples are reproducible.
	partitions := make([]Partition, 0, len(reads))
	for p := range reads {
		partitions = append(partitions, p)
	}
	sort.Slice(partitions, func(i, j int) bool {
		if partitions[i].Topic != partitions[j].Topic {
			return partitions[i].Topic < partitions[j].Topic
		}
		return partitions[i].Partition < partitions[j].Partition
	})
	r.Partitions = len(partitions)

	seenAt := make(map[string][]seen)
	for _, p := range partitions {
		lastOffset := int64(-1)
		// producer → the value read so far that it wrote last
		newest := make(map[string]written)
		for _, rec := range reads[p] {
			r.ValuesRead++
			if rec.Offset <= lastOffset {
				r.add(InconsistentOffset, "%s: offset %d after offset %d (value %s)", p, rec.Offset, lastOffset, rec.Value)
			}
			lastOffset = max(lastOffset, rec.Offset)
			seenAt[rec.Value] = append(seenAt[rec.Value], seen{p, rec.Offset})
			w, ok := values[rec.Value]
			if !ok {
				r.add(Unexpected, "%s@%d: value %s was never written", p, rec.Offset, rec.Value)
				continue
			}
			if w.write.Partition != p {
				r.add(Misplaced, "%s@%d: value %s was written to %s (txn %s)", p, rec.Offset, rec.Value, w.write.Partition, w.txn.ID)
				continue
			}
			switch w.txn.Outcome {
			case Aborted:
				r.add(AbortedRead, "%s@%d: value %s of aborted txn %s", p, rec.Offset, rec.Value, w.txn.ID)
			case Open:
				r.add(PrecommittedRead, "%s@%d: value %s of txn %s that was never ended", p, rec.Offset, rec.Value, w.txn.ID)
			}
			if len(seenAt[rec.Value]) > 1 {
				continue // a duplicate, reported below; its order says nothing new
			}
			prev, ok := newest[w.txn.Producer]
			switch {
			case ok && w.order < prev.order:
				r.add(Reordered, "%s@%d: value %s (txn %s) after %s (txn %s), written before it", p, rec.Offset, rec.Value, w.txn.ID, prev.write.Value, prev.txn.ID)
			default:
				newest[w.txn.Producer] = w
			}
		}
	}

	for _, v := range sortedKeys(seenAt) {
		if at := seenAt[v]; len(at) > 1 {
			where := make([]string, len(at))
			for i, s := range at {
				where[i] = fmt.Sprintf("%s@%d", s.partition, s.offset)
			}
			r.add(Duplicate, "value %s at %s", v, strings.Join(where, ", "))
		}
	}

	for i := range h.Txns {
		txn := &h.Txns[i]
		visible := 0
		var missing []string
		for _, w := range txn.Writes {
			if onlyIn(seenAt[w.Value], w.Partition) {
				visible++
			} else {
				missing = append(missing, w.Value)
			}
		}
		switch txn.Outcome {
		case Committed:
			for _, v := range missing {
				r.add(LostWrite, "value %s of committed txn %s (%s) never read", v, txn.ID, values[v].write.Partition)
			}
		case Unknown:
			switch visible {
			case len(txn.Writes):
				r.UnknownVisible++
			case 0:
				r.UnknownInvisible++
			}
		default:
			continue
		}
		if visible > 0 && visible < len(txn.Writes) {
			r.add(TornTxn, "%s txn %s: %d of %d values visible, missing %s", txn.Outcome, txn.ID, visible, len(txn.Writes), abbreviate(missing, 3))
		}
	}
	return r, nil
}

// onlyIn reports whether a value was read at least once in its own
// partition (reads elsewhere are Misplaced, counted separately).
func onlyIn(at []seen, p Partition) bool {
	for _, s := range at {
		if s.partition == p {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func abbreviate(values []string, n int) string {
	if len(values) <= n {
		return strings.Join(values, ",")
	}
	return fmt.Sprintf("%s,… (%d more)", strings.Join(values[:n], ","), len(values)-n)
}
