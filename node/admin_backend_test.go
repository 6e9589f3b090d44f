package node

import (
	"context"
	"testing"
	"time"

	"github.com/txncoord/txncoord/admin"
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

// fixedTxns is a txnSource of fixed transactions.
type fixedTxns map[string]coordinator.TxnDetail

func (f fixedTxns) List(coordinator.ListFilter) []coordinator.TxnSummary {
	var out []coordinator.TxnSummary
	for id := range f {
		out = append(out, coordinator.TxnSummary{TransactionalID: id})
	}
	return out
}

func (f fixedTxns) Describe(id string) (coordinator.TxnDetail, bool) { d, ok := f[id]; return d, ok }

func (f fixedTxns) AbortWith(context.Context, string, coordinator.AbortOptions) (coordinator.AbortResult, error) {
	return coordinator.AbortResult{}, nil
}

// TestDurationFilterOpenThatLong: txn list --duration-filter lists the
// transactions open at least that long: an open one started an hour ago,
// not one started then that finished within a second.
func TestDurationFilterOpenThatLong(t *testing.T) {
	start := time.Now().Add(-time.Hour).UnixMilli()
	b := &adminBackend{owner: func(string) int32 { return 0 }, coord: fixedTxns{
		"open":  {TransactionalID: "open", State: "Ongoing", StartTimestamp: start, LastUpdateTimestamp: start},
		"quick": {TransactionalID: "quick", State: "CompleteCommit", StartTimestamp: start, LastUpdateTimestamp: start + 500},
	}}
	got := b.Transactions(admin.ListFilter{MinDuration: time.Minute})
	if len(got) != 1 || got[0].TransactionalID != "open" {
		t.Errorf("--duration-filter 1m: %+v, want only the open transaction", got)
	}
	if all := b.Transactions(admin.ListFilter{}); len(all) != 2 {
		t.Errorf("no filter: %d transactions, want 2", len(all))
	}
}
