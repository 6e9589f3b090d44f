package checker

import (
	"fmt"
	"strconv"
	"strings"
)

// Outcome is a transaction's end as the client saw it.
type Outcome int8

const (
	// Open: the client never ended the transaction (no commit or abort
	// was sent), e.g. the workload stopped mid-transaction.
	Open Outcome = iota
	// Committed: the commit returned no error.
	Committed
	// Aborted: the client aborted and never asked to commit.
	Aborted
	// Unknown: the commit returned an error or the process died while
	// committing; the transaction may have committed or aborted.
	Unknown
)

var outcomeNames = [...]string{Open: "open", Committed: "committed", Aborted: "aborted", Unknown: "unknown"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o >= 0 {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// ParseOutcome is the inverse of Outcome.String.
func ParseOutcome(s string) (Outcome, error) {
	for i, n := range outcomeNames {
		if n == s {
			return Outcome(i), nil
		}
	}
	return 0, fmt.Errorf("checker: unknown outcome %q", s)
}

// Partition names one topic partition.
type Partition struct {
	Topic     string
	Partition int32
}

func (p Partition) String() string { return p.Topic + "/" + strconv.Itoa(int(p.Partition)) }

// Write is one value produced inside a transaction.
type Write struct {
	Value     string
	Partition Partition
}

// Txn is one transaction of one producer. Writes are in the order the
// producer sent them.
type Txn struct {
	// ID is unique within a history, e.g. "kgo-1/17".
	ID string
	// Producer identifies the producer (transactional id): the checker
	// compares the order of one producer's values within a partition.
	Producer string
	Outcome  Outcome
	Writes   []Write
}

// History is what a workload did. Each producer's transactions appear in the
// order it ran them.
type History struct {
	Txns []Txn
}

// Merge appends o's transactions (another producer's history).
func (h *History) Merge(o History) { h.Txns = append(h.Txns, o.Txns...) }

// Record is one value read at an offset.
type Record struct {
	Offset int64
	Value  string
}

// Reads is the final read_committed read: per partition, the data records
// in offset order (control records excluded).
type Reads map[Partition][]Record

// ParsePartition parses "topic/partition".
func ParsePartition(s string) (Partition, error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return Partition{}, fmt.Errorf("checker: partition %q is not topic/N", s)
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || n < 0 {
		return Partition{}, fmt.Errorf("checker: partition %q is not topic/N", s)
	}
	return Partition{Topic: s[:i], Partition: int32(n)}, nil
}
