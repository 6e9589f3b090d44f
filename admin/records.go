package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// The record browser: GET /v1/topics/{name}/records?partition=P&offset=O
// &limit=N&isolation=read_committed|read_uncommitted (an addition; the
// console's record view). It reads the partition from its leader with
// Kafka's Fetch at that isolation level and shows what a consumer does not:
// the control records (COMMIT and ABORT markers) and, for each
// transactional record, whether its transaction committed, aborted or is
// still open.

// RecordPage is a page of one partition's records from its leader.
type RecordPage struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Isolation is read_committed or read_uncommitted: read_committed
	// reads up to the last stable offset, read_uncommitted up to the high
	// watermark.
	Isolation        string   `json:"isolation"`
	Leader           int32    `json:"leader"`
	LogStartOffset   int64    `json:"log_start_offset"`
	HighWatermark    int64    `json:"high_watermark"`
	LastStableOffset int64    `json:"last_stable_offset"`
	Records          []Record `json:"records"`
	// NextOffset is where the next page starts (-1: nothing after this
	// page yet at this isolation level).
	NextOffset int64 `json:"next_offset"`
}

// Record is one record as the leader stores it.
type Record struct {
	Offset        int64 `json:"offset"`
	TimestampMs   int64 `json:"timestamp_ms"`
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	Transactional bool  `json:"transactional"`
	// Control is COMMIT or ABORT for a control record (a transaction
	// marker), "" for data.
	Control string `json:"control,omitempty"`
	// Transaction is, for transactional data, what became of its
	// transaction: "committed", "aborted" (a read_committed consumer
	// skips it), or "open" (no marker yet: above the last stable offset);
	// "" for other records.
	Transaction string `json:"transaction,omitempty"`
	// Key and Value are the bytes as text when they are UTF-8, else in
	// hex with a "0x" prefix; cut at 256 bytes (Truncated).
	Key       *string `json:"key"`
	Value     *string `json:"value"`
	Truncated bool    `json:"truncated,omitempty"`
}

// RecordsQuery is what GET /v1/topics/{name}/records asks.
type RecordsQuery struct {
	Topic     string
	Partition int32
	Offset    int64 // -1: the log start
	Limit     int
	// ReadCommitted is the isolation level.
	ReadCommitted bool
}

// RecordsBackend serves the record browser; errors as TopicsBackend's.
type RecordsBackend interface {
	Records(ctx context.Context, q RecordsQuery) (RecordPage, error)
}

// MaxRecordsPerPage bounds a page of the record browser.
const MaxRecordsPerPage = 500

var errNoRecords = errorString("this node does not read records: ask the coordinator node's admin API")

func recordRoutes(mux *http.ServeMux, b Backend) {
	rb, ok := b.(RecordsBackend)
	mux.HandleFunc("GET /v1/topics/{name}/records", servedIf(ok, errNoRecords)(func(w http.ResponseWriter, r *http.Request) {
		q, err := parseRecordsQuery(r)
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		page, err := rb.Records(r.Context(), q)
		if err != nil {
			writeTopicError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, page)
	}))
}

func parseRecordsQuery(r *http.Request) (RecordsQuery, error) {
	v := r.URL.Query()
	q := RecordsQuery{Topic: r.PathValue("name"), Offset: -1, Limit: 100, ReadCommitted: true}
	p, err := strconv.ParseInt(v.Get("partition"), 10, 32)
	if err != nil || p < 0 {
		return q, fmt.Errorf("partition %q: want a partition number", v.Get("partition"))
	}
	q.Partition = int32(p)
	if s := v.Get("offset"); s != "" {
		if q.Offset, err = strconv.ParseInt(s, 10, 64); err != nil || q.Offset < -1 {
			return q, fmt.Errorf("offset %q: want an offset (or -1: the log start)", s)
		}
	}
	if s := v.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit < 1 || q.Limit > MaxRecordsPerPage {
			return q, fmt.Errorf("limit %q: want 1 to %d", s, MaxRecordsPerPage)
		}
	}
	switch iso := v.Get("isolation"); iso {
	case "", "read_committed":
	case "read_uncommitted":
		q.ReadCommitted = false
	default:
		return q, errors.New("isolation " + strconv.Quote(iso) + ": want read_committed or read_uncommitted")
	}
	return q, nil
}

// Records reads a page of a partition's records (the record browser).
func (c *Client) Records(ctx context.Context, q RecordsQuery) (RecordPage, error) {
	v := url.Values{}
	v.Set("partition", strconv.Itoa(int(q.Partition)))
	v.Set("offset", strconv.FormatInt(q.Offset, 10))
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	v.Set("isolation", "read_uncommitted")
	if q.ReadCommitted {
		v.Set("isolation", "read_committed")
	}
	var out RecordPage
	return out, c.do(ctx, http.MethodGet, "/v1/topics/"+url.PathEscape(q.Topic)+"/records?"+v.Encode(), &out)
}
