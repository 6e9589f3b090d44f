package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeCoordinatorsBackend is a Backend that knows the cluster's
// coordinators: a fixed list, or err.
type fakeCoordinatorsBackend struct {
	fakeBackend
	mu           sync.Mutex
	coordinators []CoordinatorStatus
	err          error
}

func (f *fakeCoordinatorsBackend) Coordinators(context.Context) ([]CoordinatorStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.coordinators, f.err
}

// threeCoordinators is a cluster as the backend may list it: not in node
// order, partitions not ascending, and node 2 dead, owning nothing (nil).
func threeCoordinators() []CoordinatorStatus {
	return []CoordinatorStatus{
		{NodeID: 1, Addr: "127.0.0.1:9093", KafkaVersion: "4.2", Live: true, Self: true, Serving: 2,
			Partitions: []PartitionOwnership{{Partition: 4, Epoch: 5}, {Partition: 1, Epoch: 3}, {Partition: 2, Epoch: 3}}},
		{NodeID: 2, Addr: "127.0.0.1:9094", KafkaVersion: "4.1", Serving: -1},
		{NodeID: 0, Addr: "127.0.0.1:9092", KafkaVersion: "4.2", Live: true, Serving: -1,
			Partitions: []PartitionOwnership{{Partition: 0, Epoch: 3}, {Partition: 3, Epoch: 4}}},
	}
}

// GET /v1/coordinators through the client: every field round-trips,
// coordinators come by node id with their partitions ascending, and the
// backend's own slices are left as they were; a coordinator owning
// nothing shows "partitions": [] in the JSON, never null.
func TestCoordinatorsEndpoint(t *testing.T) {
	b := &fakeCoordinatorsBackend{coordinators: threeCoordinators()}
	srv := httptest.NewServer(Handler(b, prometheus.NewRegistry()))
	defer srv.Close()
	ctx := context.Background()

	got, err := NewClient(srv.URL).Coordinators(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []CoordinatorStatus{
		{NodeID: 0, Addr: "127.0.0.1:9092", KafkaVersion: "4.2", Live: true, Serving: -1,
			Partitions: []PartitionOwnership{{Partition: 0, Epoch: 3}, {Partition: 3, Epoch: 4}}},
		{NodeID: 1, Addr: "127.0.0.1:9093", KafkaVersion: "4.2", Live: true, Self: true, Serving: 2,
			Partitions: []PartitionOwnership{{Partition: 1, Epoch: 3}, {Partition: 2, Epoch: 3}, {Partition: 4, Epoch: 5}}},
		{NodeID: 2, Addr: "127.0.0.1:9094", KafkaVersion: "4.1", Serving: -1, Partitions: []PartitionOwnership{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("coordinators:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(b.coordinators, threeCoordinators()) {
		t.Fatalf("the handler reordered the backend's list: %+v", b.coordinators)
	}

	resp, err := http.Get(srv.URL + "/v1/coordinators")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/coordinators: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var fields []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || len(fields) != 3 {
		t.Fatalf("not an array of 3 objects: %v %s", err, raw)
	}
	for _, key := range []string{"node_id", "addr", "kafka_version", "live", "self", "partitions", "serving"} {
		if _, ok := fields[0][key]; !ok {
			t.Errorf("no %q in %s", key, fields[0])
		}
	}
	if p := string(fields[2]["partitions"]); p != "[]" {
		t.Errorf("node 2's partitions: %s, want []", p)
	}
	if p := string(fields[1]["partitions"]); !strings.Contains(p, `"partition": 1,`) || !strings.Contains(p, `"epoch": 5`) {
		t.Errorf("node 1's partitions: %s", p)
	}

	// A cluster with no coordinator known yet is [], not null.
	b.mu.Lock()
	b.coordinators = nil
	b.mu.Unlock()
	if got, err := NewClient(srv.URL).Coordinators(ctx); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty list: %#v %v, want []", got, err)
	}

	resp, err = http.Post(srv.URL+"/v1/coordinators", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /v1/coordinators: %d, want 405", resp.StatusCode)
	}
}

// A backend failure answers 500 with the error JSON the other routes use
// (the client retries 5xx, then shows the server's message); a Backend
// that does not report coordinators answers 404 saying so.
func TestCoordinatorsEndpointErrors(t *testing.T) {
	ctx := context.Background()
	failing := httptest.NewServer(Handler(&fakeCoordinatorsBackend{err: errors.New("etcd unreachable: context deadline exceeded")}, prometheus.NewRegistry()))
	defer failing.Close()
	var ae *APIError
	if _, err := NewClient(failing.URL).Coordinators(ctx); !errors.As(err, &ae) || ae.Status != 500 || ae.Message != "etcd unreachable: context deadline exceeded" {
		t.Fatalf("backend error: %v, want HTTP 500 with its message", err)
	}

	plain := httptest.NewServer(Handler(&fakeBackend{}, prometheus.NewRegistry()))
	defer plain.Close()
	if _, err := NewClient(plain.URL).Coordinators(ctx); !errors.As(err, &ae) || ae.Status != 404 || ae.Message != "this coordinator does not report coordinators" {
		t.Fatalf("backend without coordinators: %v, want HTTP 404 saying so", err)
	}
}
