package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
)

// TestRecordBrowserAdmin: kgo commits one transaction and aborts another
// on partition 0, then leaves a third open; GET /v1/topics/orders/records
// shows, read_uncommitted, every record with its transaction's fate
// (committed, aborted, open) and the COMMIT and ABORT control records;
// read_committed stops at the open transaction (the LSO). The topic's
// offsets list the open transaction's producer with its first offset
// (DescribeProducers at the leader). A page of the transactions list
// comes from the node's own pager, with the totals of every match.
func TestRecordBrowserAdmin(t *testing.T) {
	_, e := startTwoLeadersAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(id string, commit *bool) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.TransactionalID(id), kgo.DefaultProduceTopic("orders"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Key: []byte(id), Value: []byte(fmt.Sprint(id, "-", i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if commit != nil {
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(*commit)); err != nil {
				t.Fatal(err)
			}
			// EndTxn answers before its marker is written: the next
			// producer's records must come after it for the layout
			// below.
			waitTxnComplete(t, e, id)
		}
	}
	yes, no := true, false
	produce("rb-commit", &yes)
	produce("rb-abort", &no)
	produce("rb-open", nil)
	api := admin.NewClient(e.Admin.URL())
	describe := func(recs []admin.Record) string {
		s := ""
		for _, r := range recs {
			switch {
			case r.Control != "":
				s += fmt.Sprintf("%d:%s ", r.Offset, r.Control)
			default:
				s += fmt.Sprintf("%d:%s=%s ", r.Offset, *r.Value, r.Transaction)
			}
		}
		return s
	}
	// The markers are written after EndTxn answers: wait for both.
	var page admin.RecordPage
	var err error
	want := "0:rb-commit-0=committed 1:rb-commit-1=committed 2:COMMIT 3:rb-abort-0=aborted 4:rb-abort-1=aborted 5:ABORT 6:rb-open-0=open 7:rb-open-1=open "
	for deadline := time.Now().Add(10 * time.Second); ; {
		page, err = api.Records(ctx, admin.RecordsQuery{Topic: "orders", Partition: 0, Offset: -1})
		if err != nil {
			t.Fatal(err)
		}
		if describe(page.Records) == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	page, err = api.Records(ctx, admin.RecordsQuery{Topic: "orders", Partition: 0, Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(page.Records); got != want || page.HighWatermark != 8 || page.LastStableOffset != 6 || page.Isolation != "read_uncommitted" {
		t.Fatalf("read_uncommitted: %s (HW %d, LSO %d, %s)\nwant %s (HW 8, LSO 6)", got, page.HighWatermark, page.LastStableOffset, page.Isolation, want)
	}
	page, err = api.Records(ctx, admin.RecordsQuery{Topic: "orders", Partition: 0, Offset: 0, ReadCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describe(page.Records), "0:rb-commit-0=committed 1:rb-commit-1=committed 2:COMMIT 3:rb-abort-0=aborted 4:rb-abort-1=aborted 5:ABORT "; got != want {
		t.Fatalf("read_committed: %s\nwant %s", got, want)
	}
	page, err = api.Records(ctx, admin.RecordsQuery{Topic: "orders", Partition: 0, Offset: 1, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(page.Records); got != "1:rb-commit-1=committed 2:COMMIT " || page.NextOffset != 3 {
		t.Fatalf("a page of 2 from offset 1: %s next %d, want offsets 1 and 2, next 3", got, page.NextOffset)
	}

	// A page of the transactions list, described by the node itself
	// (admin.TxnPager): the totals count every match.
	for _, c := range []struct{ query, ids, total string }{
		{"?id=RB-*&coordinator=0&offset=1&limit=1", "[rb-commit]", "3"},
		{"?state=Ongoing,Empty&limit=5", "[rb-open]", "1"},
		{"?id=rb-&coordinator=1", "[]", "0"},
	} {
		resp, err := http.Get(e.Admin.URL() + "/v1/transactions" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		var txns []admin.Txn
		json.NewDecoder(resp.Body).Decode(&txns)
		resp.Body.Close()
		ids := []string{}
		for _, x := range txns {
			ids = append(ids, x.TransactionalID)
		}
		if fmt.Sprint(ids) != c.ids || resp.Header.Get("X-Total-Count") != c.total {
			t.Errorf("%s: %v of %s, want %s of %s", c.query, ids, resp.Header.Get("X-Total-Count"), c.ids, c.total)
		}
	}

	// A page of the partitions' offsets: the leaders are asked for those.
	resp, err := http.Get(e.Admin.URL() + "/v1/topics/orders/offsets?offset=1&limit=2")
	if err != nil {
		t.Fatal(err)
	}
	var paged []admin.PartitionOffsets
	json.NewDecoder(resp.Body).Decode(&paged)
	resp.Body.Close()
	if len(paged) != 2 || paged[0].Partition != 1 || paged[1].Partition != 2 || paged[0].HighWatermark != 0 || paged[0].Leader < 1 || resp.Header.Get("X-Total-Count") != "4" {
		t.Fatalf("offsets page from 1, 2 partitions: %+v (X-Total-Count %q), want partitions 1 and 2 of 4 with their leaders, empty",
			paged, resp.Header.Get("X-Total-Count"))
	}

	offsets, err := api.TopicOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	for _, p := range offsets[0].Producers {
		if p.CurrentTxnStartOffset == 6 {
			open++
		}
	}
	if len(offsets[0].Producers) != 3 || open != 1 {
		t.Fatalf("partition 0's producers: %+v, want 3 with one transaction open from offset 6", offsets[0].Producers)
	}
}

// waitTxnComplete waits until id's last transaction has its markers
// written (CompleteCommit or CompleteAbort at e's coordinator): its EndTxn
// answered once its Prepare was durable.
func waitTxnComplete(t *testing.T, e *Embedded, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, _ := e.Coordinator.Coordinator.Describe(id)
		if d.State == "CompleteCommit" || d.State == "CompleteAbort" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %q 10 s after its end", id, d.State)
		}
	}
}
