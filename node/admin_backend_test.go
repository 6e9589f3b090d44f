package node

import (
	"testing"
	"time"

	"github.com/txncoord/txncoord/coordinator"
)

// TestFinishedTxnDuration: a finished transaction's duration is fixed at
// its end (its last update, the Complete record), while an open one's
// grows with the clock.
func TestFinishedTxnDuration(t *testing.T) {
	b := &adminBackend{owner: func(string) int32 { return 0 }}
	start := time.Now().Add(-time.Hour).UnixMilli()
	for _, state := range []string{"CompleteCommit", "CompleteAbort"} {
		got := b.txn(coordinator.TxnDetail{TransactionalID: "t", State: state, StartTimestamp: start, LastUpdateTimestamp: start + 250}).DurationMs
		if got != 250 {
			t.Errorf("%s: duration %d ms, want 250 (start to end)", state, got)
		}
	}
	open := b.txn(coordinator.TxnDetail{TransactionalID: "t", State: "Ongoing", StartTimestamp: start, LastUpdateTimestamp: start + 250}).DurationMs
	if open < time.Hour.Milliseconds() {
		t.Errorf("Ongoing: duration %d ms, want at least an hour (still open)", open)
	}
	if empty := b.txn(coordinator.TxnDetail{TransactionalID: "t", State: "Empty", StartTimestamp: -1}).DurationMs; empty != -1 {
		t.Errorf("Empty: duration %d, want -1", empty)
	}
}
