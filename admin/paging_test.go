package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestTransactionsPaged: the list filtered on the server (several states,
// an id glob or substring, a coordinator) and cut into pages, with the
// totals in headers; bad parameters answer 400; without them the answer
// is the whole list, as it always was.
func TestTransactionsPaged(t *testing.T) {
	b := &fakeBackend{txns: map[string]Txn{}}
	for i := 0; i < 25; i++ {
		state := []string{"Ongoing", "CompleteCommit", "PrepareAbort", "CompleteAbort", "CompleteCommit"}[i%5]
		id := fmt.Sprintf("orders-%02d", i)
		b.txns[id] = Txn{TransactionalID: id, State: state, CoordinatorID: int32(i % 2)}
	}
	b.txns["Payments-1"] = Txn{TransactionalID: "Payments-1", State: "Ongoing"}
	srv := httptest.NewServer(Handler(b, nil))
	defer srv.Close()
	get := func(query string) ([]string, http.Header, int) {
		resp, err := http.Get(srv.URL + "/v1/transactions" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var txns []Txn
		json.NewDecoder(resp.Body).Decode(&txns)
		var ids []string
		for _, x := range txns {
			ids = append(ids, x.TransactionalID)
		}
		return ids, resp.Header, resp.StatusCode
	}
	for _, c := range []struct {
		query, ids, total, counts string
	}{
		{"?limit=3", "[Payments-1 orders-00 orders-01]", "26", `{"CompleteAbort":5,"CompleteCommit":10,"Ongoing":6,"PrepareAbort":5}`},
		{"?offset=24&limit=3", "[orders-23 orders-24]", "26", ""},
		{"?state=Ongoing,PrepareAbort&limit=4", "[Payments-1 orders-00 orders-02 orders-05]", "11", `{"Ongoing":6,"PrepareAbort":5}`},
		{"?id=PAY", "[Payments-1]", "1", `{"Ongoing":1}`},
		{"?id=orders-1*&coordinator=1", "[orders-11 orders-13 orders-15 orders-17 orders-19]", "5", ""},
		{"?id=orders-?5&state=Ongoing", "[orders-05 orders-15]", "2", ""},
	} {
		ids, hdr, status := get(c.query)
		if status != 200 || fmt.Sprint(ids) != c.ids || hdr.Get("X-Total-Count") != c.total || (c.counts != "" && hdr.Get("X-State-Counts") != c.counts) {
			t.Errorf("%s: %d %v total %q counts %q, want 200 %s total %s counts %s", c.query, status, ids, hdr.Get("X-Total-Count"), hdr.Get("X-State-Counts"), c.ids, c.total, c.counts)
		}
	}
	if ids, hdr, _ := get(""); len(ids) != 26 || hdr.Get("X-Total-Count") != "" {
		t.Errorf("no paging asked: %d transactions, X-Total-Count %q; want all 26 and no header", len(ids), hdr.Get("X-Total-Count"))
	}
	for _, bad := range []string{"?limit=-1", "?offset=x", "?state=Ongoing,Nope", "?coordinator=one"} {
		if _, _, status := get(bad); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, status)
		}
	}
}

// TestTopicPartitionsPaged: GET /v1/topics/{name}?offset&limit answers a
// page of partition_info with X-Total-Count; partitions keeps the count.
func TestTopicPartitionsPaged(t *testing.T) {
	wide := Topic{Name: "wide", Partitions: 1000}
	for p := int32(0); p < 1000; p++ {
		wide.PartitionInfo = append(wide.PartitionInfo, TopicPartitionInfo{Partition: p, Leader: 1 + p%2})
	}
	b := &fakeTopicsBackend{topics: map[string]Topic{"wide": wide}}
	srv := httptest.NewServer(Handler(b, nil))
	defer srv.Close()
	for _, c := range []struct {
		query      string
		first, n   int32
		total      string
		wantStatus int
	}{
		{"?offset=100&limit=100", 100, 100, "1000", 200},
		{"?offset=950&limit=100", 950, 50, "1000", 200},
		{"", 0, 1000, "", 200},
		{"?limit=x", 0, 0, "", 400},
	} {
		resp, err := http.Get(srv.URL + "/v1/topics/wide" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		var got Topic
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != c.wantStatus {
			t.Errorf("%s: %d, want %d", c.query, resp.StatusCode, c.wantStatus)
			continue
		}
		if c.wantStatus != 200 {
			continue
		}
		if int32(len(got.PartitionInfo)) != c.n || got.PartitionInfo[0].Partition != c.first || got.Partitions != 1000 || resp.Header.Get("X-Total-Count") != c.total {
			t.Errorf("%s: %d partitions from %d (of %d), X-Total-Count %q; want %d from %d of 1000, %q", c.query, len(got.PartitionInfo),
				got.PartitionInfo[0].Partition, got.Partitions, resp.Header.Get("X-Total-Count"), c.n, c.first, c.total)
		}
	}
}
