package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/markersender"
)

// fakeBackend is an in-memory Backend: the admin API has no logic of its
// own beyond routing, status codes and JSON, which is what is tested here.
type fakeBackend struct {
	txns   map[string]Txn
	filter ListFilter
}

func (f *fakeBackend) Transactions(lf ListFilter) []Txn {
	f.filter = lf
	var out []Txn
	for _, t := range f.txns {
		if lf.State == "" || t.State == lf.State {
			out = append(out, t)
		}
	}
	return out
}

func (f *fakeBackend) Transaction(id string) (Txn, error) {
	t, ok := f.txns[id]
	if !ok {
		return Txn{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return t, nil
}

func (f *fakeBackend) Abort(_ context.Context, id string) (Txn, error) {
	t, err := f.Transaction(id)
	if err != nil {
		return t, err
	}
	if t.State != "Ongoing" {
		return t, fmt.Errorf("%w: %s is %s", ErrConflict, id, t.State)
	}
	t.State = "PrepareAbort"
	f.txns[id] = t
	return t, nil
}

func (f *fakeBackend) RetryMarkers(id string) (Txn, error) { return f.Transaction(id) }
func (f *fakeBackend) Leaders() []markersender.LeaderStatus {
	return []markersender.LeaderStatus{{NodeID: 1, Addr: "127.0.0.1:9093", KafkaVersion: "4.2",
		WriteTxnMarkers: markersender.VersionRange{Min: 0, Max: 2, InUse: 2}, Connected: true}}
}
func (f *fakeBackend) Markers() []markersender.PendingTxn { return nil }
func (f *fakeBackend) Ready() error                       { return errors.New("recovering") }

func TestAdminAPI(t *testing.T) {
	b := &fakeBackend{txns: map[string]Txn{
		"a": {TransactionalID: "a", State: "Ongoing", ProducerID: 7},
		"b": {TransactionalID: "b", State: "CompleteCommit"},
	}}
	srv := httptest.NewServer(Handler(b, prometheus.NewRegistry()))
	defer srv.Close()
	cases := []struct {
		method, path string
		status       int
		body         string // a substring of the JSON answer
	}{
		{"GET", "/v1/transactions", 200, `"transactional_id": "a"`},
		{"GET", "/v1/transactions?state=Ongoing", 200, `"state": "Ongoing"`},
		{"GET", "/v1/transactions?state=Bogus", 400, `"error": "state \"Bogus\"`},
		{"GET", "/v1/transactions?duration_filter=soon", 400, `duration_filter`},
		{"GET", "/v1/transactions/a", 200, `"producer_id": 7`},
		{"GET", "/v1/transactions/zzz", 404, `"error": "transactional id not found`},
		{"POST", "/v1/transactions/b/abort", 409, `"error": "conflict`},
		{"POST", "/v1/transactions/a/abort", 200, `"state": "PrepareAbort"`},
		{"GET", "/v1/leaders", 200, `"write_txn_markers": {`},
		{"GET", "/v1/markers", 200, `[]`},
		{"GET", "/healthz", 200, `"ok"`},
		{"GET", "/readyz", 503, `recovering`},
		{"GET", "/v1/nope", 404, `no such endpoint`},
		{"DELETE", "/v1/transactions/a", 404, `no such endpoint`},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(sb.String(), tc.body) {
			t.Errorf("%s %s: %d %s, want %d containing %q", tc.method, tc.path, resp.StatusCode, sb.String(), tc.status, tc.body)
		}
		if tc.status >= 400 {
			var eb ErrorBody
			if json.Unmarshal([]byte(sb.String()), &eb) != nil || eb.Error == "" {
				t.Errorf("%s %s: error answer is not {\"error\": ...}: %s", tc.method, tc.path, sb.String())
			}
		}
	}
}

func TestClientAndToken(t *testing.T) {
	b := &fakeBackend{txns: map[string]Txn{"a": {TransactionalID: "a", State: "Ongoing"}}}
	s, err := Start("127.0.0.1:0", b, prometheus.NewRegistry(), Auth{Token: "s3cret", Open: []string{"/metrics"}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	if _, err := NewClient(s.URL()).Transactions(ctx, ListFilter{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without token: %v, want HTTP 401", err)
	}
	txns, err := NewClientWithToken(s.URL(), "s3cret").Transactions(ctx, ListFilter{State: "Ongoing"})
	if err != nil || len(txns) != 1 || b.filter.State != "Ongoing" {
		t.Fatalf("with token: %v %v (filter %+v)", txns, err, b.filter)
	}
	var apiErr *APIError
	if _, err := NewClientWithToken(s.URL(), "s3cret").Transaction(ctx, "missing"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("missing id: %v", err)
	}
	if m, err := NewClient(s.URL()).Raw(ctx, "/metrics"); err != nil || strings.Contains(m, "401") {
		t.Fatalf("/metrics must stay open: %v %q", err, m)
	}
}
