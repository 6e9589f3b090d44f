package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeTopicsBackend is a Backend with a topic controller.
type fakeTopicsBackend struct {
	fakeBackend
	topics map[string]Topic
}

func (f *fakeTopicsBackend) Topics(context.Context) ([]Topic, error) {
	var out []Topic
	for _, t := range f.topics {
		out = append(out, t)
	}
	return out, nil
}

func (f *fakeTopicsBackend) Topic(_ context.Context, name string) (Topic, error) {
	t, ok := f.topics[name]
	if !ok {
		return t, fmt.Errorf("%w: %q", ErrTopicNotFound, name)
	}
	return t, nil
}

func (f *fakeTopicsBackend) CreateTopic(_ context.Context, req CreateTopic) (Topic, error) {
	switch {
	case f.topics[req.Name].Name != "":
		return Topic{}, fmt.Errorf("%w: %q", ErrTopicExists, req.Name)
	case req.Partitions < -1:
		return Topic{}, fmt.Errorf("%w: partitions %d", ErrInvalid, req.Partitions)
	}
	t := Topic{Name: req.Name, Partitions: req.Partitions, Configs: req.Configs}
	if !req.ValidateOnly {
		f.topics[req.Name] = t
	}
	return t, nil
}

func (f *fakeTopicsBackend) DeleteTopic(_ context.Context, name string) error {
	if _, ok := f.topics[name]; !ok {
		return fmt.Errorf("%w: %q", ErrTopicNotFound, name)
	}
	delete(f.topics, name)
	return nil
}

// The topics endpoints through the client: create (201; 409 when it
// exists; 400 for what the backend refuses and for a body without a name
// or with an unknown field), validate-only creates nothing, list,
// describe, delete (404 for an unknown topic); a node without the topic
// controller answers 404 saying so.
func TestTopicsEndpoints(t *testing.T) {
	b := &fakeTopicsBackend{topics: map[string]Topic{}}
	srv := httptest.NewServer(Handler(b, prometheus.NewRegistry()))
	defer srv.Close()
	cl := NewClient(srv.URL)
	ctx := context.Background()
	var ae *APIError
	status := func(err error) int {
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}
	if _, err := cl.CreateTopic(ctx, CreateTopic{Name: "dry", Partitions: 2, ValidateOnly: true}); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if _, err := cl.Topic(ctx, "dry"); status(err) != 404 {
		t.Fatalf("a validate-only topic was created: %v", err)
	}
	created, err := cl.CreateTopic(ctx, CreateTopic{Name: "orders", Partitions: 6, Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil || created.Partitions != 6 || created.Configs["retention.ms"] != "1000" {
		t.Fatalf("create: %+v %v", created, err)
	}
	if _, err := cl.CreateTopic(ctx, CreateTopic{Name: "orders"}); status(err) != 409 {
		t.Fatalf("create an existing topic: %v, want 409", err)
	}
	if _, err := cl.CreateTopic(ctx, CreateTopic{Name: "bad", Partitions: -5}); status(err) != 400 {
		t.Fatalf("create refused by the backend: %v, want 400", err)
	}
	for _, body := range []string{`{"partitions": 3}`, `{"name": "x", "partitons": 3}`, `not json`} {
		resp, err := http.Post(srv.URL+"/v1/topics", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("POST /v1/topics %s: %d, want 400", body, resp.StatusCode)
		}
	}
	ts, err := cl.Topics(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "orders" {
		t.Fatalf("list: %+v %v", ts, err)
	}
	if got, err := cl.Topic(ctx, "orders"); err != nil || got.Partitions != 6 {
		t.Fatalf("describe: %+v %v", got, err)
	}
	if err := cl.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := cl.DeleteTopic(ctx, "orders"); status(err) != 404 {
		t.Fatalf("delete a deleted topic: %v, want 404", err)
	}
	if ts, err := cl.Topics(ctx); err != nil || ts == nil || len(ts) != 0 {
		t.Fatalf("list after delete: %#v %v (want [], not null)", ts, err)
	}

	plain := httptest.NewServer(Handler(&fakeBackend{}, prometheus.NewRegistry()))
	defer plain.Close()
	if _, err := NewClient(plain.URL).Topics(ctx); status(err) != 404 || ae.Message != errNoTopics.Error() {
		t.Fatalf("node without the controller: %v", err)
	}
}
