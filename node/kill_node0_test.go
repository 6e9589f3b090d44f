package node

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/internal/historytest"
)

// refused fails unless addr refuses connections.
func refused(t *testing.T, addr string) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("killed node still accepts connections on %s", addr)
	}
}

// getStatus is GET url's status and its JSON error, if any.
func getStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body admin.ErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error
}

// TestFaultsKillNode0Single: a kill of the single coordinator of `up`
// through the admin API, from kgo's side. While node 0 is down its Kafka
// address refuses connections, the admin API keeps answering (/v1/faults,
// /metrics) and what needs the node answers 503 with a JSON error; ending
// the fault with DELETE restarts it on its state: a group's offset and a
// topic created before the kill are there, and the producer that kept
// committing through the kill (new clients after errors) leaves a history
// with 0 anomalies, every value committed before the kill read after it.
func TestFaultsKillNode0Single(t *testing.T) {
	f, e := startTwoLeadersAdmin(t)
	seeds := []string{f.Coordinator.Addr, f.Leaders[0].Addr, f.Leaders[1].Addr}
	killNode0(t, e, seeds, "kill-node0")
}

// TestFaultsKillNode0Etcd is TestFaultsKillNode0Single for the etcd mode's
// node 0 (the topic controller, serving the admin API): its partitions
// move to the others while it is down.
func TestFaultsKillNode0Etcd(t *testing.T) {
	e := startSeveralCoordinators(t)
	adm, err := admin.Start("127.0.0.1:0", e.Coordinator.AdminBackend(), e.Metrics, admin.Auth{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	e.Admin = adm
	waitOwned(t, e, 12)
	var seeds []string
	for _, n := range e.View.File().Coordinators {
		seeds = append(seeds, n.Addr)
	}
	// The producer's id is node 0's: its commits go on through the
	// coordinator that takes the partition over.
	killNode0(t, e, seeds, idOwnedBy(t, e, 0))
}

// killNode0 kills node 0 through the admin API while producer id commits
// in a loop, checks what answers meanwhile, restarts it, and checks its
// state and the history.
func killNode0(t *testing.T, e *Embedded, seeds []string, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "made-before"); err != nil {
		t.Fatal(err)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 7, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "kept-group", offsets); err != nil {
		t.Fatal(err)
	}

	c := historytest.Start(t, seeds, id)
	c.WaitCommits(t, 0, 3)
	api := admin.NewClient(e.Admin.URL())
	kill, err := api.AddFault(ctx, faults.Spec{Kind: faults.Kill, Node: 0})
	if err != nil {
		t.Fatal(err)
	}
	before := c.Commits()
	refused(t, e.View.Coordinator().Addr)
	list, err := api.Faults(ctx)
	if err != nil {
		t.Fatalf("GET /v1/faults while node 0 is killed: %v", err)
	}
	if len(list.Faults) != 1 || list.Faults[0].Kind != faults.Kill {
		t.Fatalf("GET /v1/faults while node 0 is killed: %+v, want the kill", list.Faults)
	}
	if code, msg := getStatus(t, e.Admin.URL()+"/v1/transactions"); code != http.StatusServiceUnavailable || msg == "" {
		t.Fatalf("GET /v1/transactions while node 0 is killed: %d %q, want 503 with an error", code, msg)
	}
	if code, _ := getStatus(t, e.Admin.URL()+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("GET /readyz while node 0 is killed: %d, want 503", code)
	}
	if code, _ := getStatus(t, e.Admin.URL()+"/metrics"); code != http.StatusOK {
		t.Fatalf("GET /metrics while node 0 is killed: %d, want 200", code)
	}
	time.Sleep(time.Second) // the producer meets the dead node
	if _, err := api.RemoveFault(ctx, kill.ID); err != nil {
		t.Fatalf("DELETE /v1/faults/%d: %v", kill.ID, err)
	}
	if code, msg := getStatus(t, e.Admin.URL()+"/v1/transactions"); code != http.StatusOK {
		t.Fatalf("GET /v1/transactions after the restart: %d %q", code, msg)
	}
	c.WaitCommits(t, before, 3)
	h := c.Finish()

	// The state is read through a new client: the first one's connection
	// to node 0 from before the kill ends in EOF at its next use, and kgo
	// does not retry a FindCoordinator that fails inside a sharded request
	// (OffsetFetch), as it would not against a restarted Kafka broker.
	cl.Close()
	adm, _ = adminAt(t, seeds[0])
	topics, err := adm.ListTopics(ctx, "made-before")
	if err != nil || !topics.Has("made-before") {
		t.Fatalf("topic made-before after node 0's restart: %v %v", topics, err)
	}
	fetched, err := adm.FetchOffsets(ctx, "kept-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("orders", 1); !ok || o.At != 7 || o.Err != nil {
		t.Fatalf("kept-group's offset on orders/1 after node 0's restart: %+v %v, want 7", o, ok)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal(ctx.Err())
	}
	checkHistory(t, seeds[0], h)
}
