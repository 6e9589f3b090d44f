package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/txncore"
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

func (f *fakeBackend) Abort(_ context.Context, id string, force bool) (Txn, error) {
	t, err := f.Transaction(id)
	if err != nil {
		return t, err
	}
	if t.State == "PrepareCommit" && force {
		t.State, t.GaveUp = "CompleteCommit", []txncore.TopicPartition{{Topic: "orders", Partition: 1}}
		f.txns[id] = t
		return t, nil
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
		"c": {TransactionalID: "c", State: "PrepareCommit"},
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
		{"POST", "/v1/transactions/c/abort", 409, `"error": "conflict`},
		{"POST", "/v1/transactions/c/abort?force=maybe", 400, `force \"maybe\": want true or false`},
		{"POST", "/v1/transactions/c/abort?force=true", 200, `"gave_up_partitions": [`},
		{"GET", "/v1/leaders", 200, `"write_txn_markers": {`},
		{"GET", "/v1/markers", 200, `[]`},
		{"GET", "/healthz", 200, `"ok"`},
		{"GET", "/readyz", 503, `recovering`},
		{"GET", "/v1/nope", 404, `no such endpoint`},
		{"DELETE", "/v1/transactions/a", 405, `method DELETE not allowed on /v1/transactions/a (allowed: GET, HEAD)`},
		{"DELETE", "/v1/nope", 404, `no such endpoint`},
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

// TestConsoleWithToken: with a token, the console's files are served
// without it (they hold no data; the page asks for the token), every API
// path still needs it, and GET / is the page, not the JSON 404.
func TestConsoleWithToken(t *testing.T) {
	b := &fakeBackend{txns: map[string]Txn{"a": {TransactionalID: "a", State: "Ongoing"}}}
	s, err := Start("127.0.0.1:0", b, prometheus.NewRegistry(), Auth{Token: "s3cret"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	for _, tc := range []struct {
		method, path, token string
		status              int
		body                string
	}{
		{"GET", "/", "", 200, "<title>txncoord console</title>"},
		{"GET", "/console/app.js", "", 200, "Authorization"},
		{"GET", "/console/app.css", "", 200, "table"},
		{"GET", "/v1/transactions", "", 401, "missing or invalid bearer token"},
		{"GET", "/metrics", "", 401, "missing or invalid bearer token"},
		{"GET", "/console/other", "", 401, "missing or invalid bearer token"},
		{"GET", "/v1/transactions", "s3cret", 200, `"transactional_id": "a"`},
		{"POST", "/", "s3cret", 405, "allowed: GET, HEAD"},
		{"GET", "/nope", "s3cret", 404, "no such endpoint"},
	} {
		req, _ := http.NewRequest(tc.method, s.URL()+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.body) {
			t.Errorf("%s %s (token %q): %d %.80q, want %d containing %q", tc.method, tc.path, tc.token, resp.StatusCode, body, tc.status, tc.body)
		}
	}
}

// A known path asked with a method it does not serve is answered 405 with
// the methods it does serve in Allow (RFC 9110 §15.5.6); an unknown path
// 404 without one.
func TestWrongMethod(t *testing.T) {
	b := &fakeBackend{txns: map[string]Txn{"a": {TransactionalID: "a", State: "Ongoing"}}}
	srv := httptest.NewServer(Handler(b, prometheus.NewRegistry()))
	defer srv.Close()
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"DELETE", "/v1/transactions/a", 405, "GET, HEAD"},
		{"PUT", "/v1/transactions", 405, "GET, HEAD"},
		{"GET", "/v1/transactions/a/abort", 405, "POST"},
		{"GET", "/v1/transactions/a/retry-markers", 405, "POST"},
		{"POST", "/v1/leaders", 405, "GET, HEAD"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"DELETE", "/metrics", 405, "GET, HEAD"},
		{"DELETE", "/v1/nope", 404, ""},
		{"GET", "/v1/transactions/a/nope", 404, ""},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Allow") != tc.allow || err != nil || eb.Error == "" {
			t.Errorf("%s %s: %d Allow %q body %+v (%v), want %d Allow %q with an error body",
				tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), eb, err, tc.status, tc.allow)
		}
	}
}

// The bearer scheme is case-insensitive (RFC 9110 §11.1); the token is not.
func TestBearerScheme(t *testing.T) {
	b := &fakeBackend{txns: map[string]Txn{}}
	s, err := Start("127.0.0.1:0", b, prometheus.NewRegistry(), Auth{Token: "s3cret"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	for header, status := range map[string]int{
		"Bearer s3cret":   200,
		"bearer s3cret":   200,
		"BEARER s3cret":   200,
		"bEaReR  s3cret ": 200,
		"Bearer S3CRET":   401,
		"bearer wrong":    401,
		"Basic s3cret":    401,
		"s3cret":          401,
		"Bearers3cret":    401,
		"":                401,
	} {
		req, _ := http.NewRequest("GET", s.URL()+"/v1/transactions", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Errorf("Authorization %q: %d, want %d", header, resp.StatusCode, status)
		}
	}
}

// Every connection is bounded in time: reading the request, writing the
// answer and waiting idle between requests. An idle keep-alive connection
// is closed once the idle timeout has passed.
func TestServerTimeouts(t *testing.T) {
	b := &fakeBackend{txns: map[string]Txn{}}
	start := func() *Server {
		s, err := Start("127.0.0.1:0", b, prometheus.NewRegistry(), Auth{}, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(context.Background()) })
		return s
	}
	s := start()
	if s.srv.ReadHeaderTimeout <= 0 || s.srv.ReadTimeout <= 0 || s.srv.WriteTimeout <= 0 || s.srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: read header %v, read %v, write %v, idle %v; want all set",
			s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.WriteTimeout, s.srv.IdleTimeout)
	}
	// pprof refuses a profile at least as long as the write timeout: the
	// default 30 s profile must fit.
	if s.srv.WriteTimeout <= 30*time.Second {
		t.Fatalf("write timeout %v leaves no room for a 30 s /debug/pprof/profile", s.srv.WriteTimeout)
	}

	old := timeouts
	defer func() { timeouts = old }()
	timeouts.idle = 200 * time.Millisecond
	s = start()
	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("GET /healthz: %d, close %v", resp.StatusCode, resp.Close)
	}
	idleSince := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v, want the server to close it (EOF)", err)
	}
	if idle := time.Since(idleSince); idle > 5*time.Second {
		t.Fatalf("idle connection closed after %v, idle timeout 200ms", idle)
	}
}

// TestDownAndRebind: while the node behind the API is down, the paths
// that live beside it answer and every other one is 503 with the reason
// as JSON (the token still required); Rebind serves a new backend.
func TestDownAndRebind(t *testing.T) {
	old := &fakeBackend{txns: map[string]Txn{"old": {TransactionalID: "old", State: "Ongoing"}}}
	s, err := Start("127.0.0.1:0", old, prometheus.NewRegistry(), Auth{Token: "s3cret"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	api := NewClientWithToken(s.URL(), "s3cret")
	s.Down(errors.New("node 0 is killed"))
	var apiErr *APIError
	if _, err := api.Transactions(ctx, ListFilter{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "node 0 is killed") {
		t.Fatalf("GET /v1/transactions while down: %v, want 503 naming why", err)
	}
	if _, err := NewClient(s.URL()).Transactions(ctx, ListFilter{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without token while down: %v, want HTTP 401", err)
	}
	for _, path := range []string{"/metrics", "/healthz"} {
		if _, err := api.Raw(ctx, path); err != nil {
			t.Errorf("GET %s while down: %v", path, err)
		}
	}
	// /v1/faults survives: the fake backend takes no faults, so it is the
	// routes' own 404, not the 503.
	if _, err := api.Faults(ctx); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("GET /v1/faults while down: %v, want the routes' 404", err)
	}
	s.Rebind(&fakeBackend{txns: map[string]Txn{"new": {TransactionalID: "new", State: "Ongoing"}}})
	s.Down(nil)
	txns, err := api.Transactions(ctx, ListFilter{})
	if err != nil || len(txns) != 1 || txns[0].TransactionalID != "new" {
		t.Fatalf("after Rebind: %+v %v, want the new backend's", txns, err)
	}
}
