package node

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/security"
)

// TestAdminACLsOnEveryCoordinator: with three coordinators, each a
// process of its own with its own admin API, and security on, the admin
// API's acls endpoints answer on the coordinators that do not hold the
// controller as on the holder: an ACL created through one of them is
// listed through the other (and by kadm through the holder), deleted
// through the other, and then neither kadm nor either admin API lists it.
// A creation the holder refuses is a 400 there too.
func TestAdminACLsOnEveryCoordinator(t *testing.T) {
	f, lns, _, clusterPw := secureSeveralFile(t)
	var mu sync.Mutex
	coords, _ := startSeparateCoordinators(t, f, lns, &mu)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var holder int32 = -1
	for deadline := time.Now().Add(30 * time.Second); holder < 0; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		for id, co := range coords {
			if h, _, ok := co.ctl.Holder(); ok && h == id && co.ctl.Current() != nil {
				holder = id
			}
		}
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no coordinator runs the controller")
		}
	}
	const token = "acls-test-token"
	var clients []*admin.Client
	mu.Lock()
	for id, co := range coords {
		if id == holder {
			continue
		}
		srv, err := admin.Start("127.0.0.1:0", co.AdminBackend(), nil, admin.Auth{Token: token}, zerolog.Nop())
		if err != nil {
			mu.Unlock()
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Shutdown(context.Background()) })
		clients = append(clients, admin.NewClientWithToken(srv.URL(), token))
	}
	mu.Unlock()
	if len(clients) != 2 {
		t.Fatalf("%d coordinators besides the holder %d, want 2", len(clients), holder)
	}
	createVia, listVia := clients[0], clients[1]

	cl, err := kgo.NewClient(kgo.SeedBrokers(f.Coordinators[holder].Addr),
		kgo.SASL(scram.Auth{User: security.LocalClusterUser, Pass: clusterPw}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	kafkaACLs := func() []string {
		t.Helper()
		res, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics().ResourcePatternType(kadm.ACLPatternAny).
			Allow().AllowHosts().Operations(kadm.OpAny))
		if err != nil {
			t.Fatalf("kadm DescribeACLs: %v", err)
		}
		var out []string
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("kadm DescribeACLs: %v", r.Err)
			}
			for _, d := range r.Described {
				out = append(out, d.Principal+" "+d.Name+" "+d.Operation.String())
			}
		}
		return out
	}

	acl := admin.ACL{ResourceType: "TOPIC", ResourceName: "orders-", PatternType: "PREFIXED", Principal: "User:alice",
		Host: "*", Operation: "WRITE", Permission: "ALLOW"}
	if err := createVia.CreateACLs(ctx, []admin.ACL{acl}); err != nil {
		t.Fatalf("create through a coordinator without the controller: %v", err)
	}
	listed, err := listVia.ACLs(ctx, admin.ACLFilter{Principal: "User:alice"})
	if err != nil {
		t.Fatalf("list through another: %v", err)
	}
	if len(listed) != 1 || listed[0] != acl {
		t.Fatalf("listed %+v, want %+v", listed, acl)
	}
	if got := kafkaACLs(); len(got) != 1 || got[0] != "User:alice orders- WRITE" {
		t.Fatalf("kadm through the holder lists %v", got)
	}
	// The holder's own refusal comes back as the admin API's.
	bad := acl
	bad.ResourceType, bad.ResourceName = "CLUSTER", "not-the-cluster"
	var herr *admin.APIError
	if err := createVia.CreateACLs(ctx, []admin.ACL{bad}); !errors.As(err, &herr) || herr.Status != http.StatusBadRequest {
		t.Errorf("an invalid ACL through a coordinator without the controller: %v, want a 400", err)
	}

	deleted, err := listVia.DeleteACLs(ctx, admin.ACLFilter{ResourceType: "TOPIC", PatternType: "ANY"})
	if err != nil {
		t.Fatalf("delete through another: %v", err)
	}
	if len(deleted) != 1 || deleted[0] != acl {
		t.Fatalf("deleted %+v, want %+v", deleted, acl)
	}
	if got := kafkaACLs(); len(got) != 0 {
		t.Fatalf("kadm lists %v after the delete", got)
	}
	for i, c := range clients {
		if left, err := c.ACLs(ctx, admin.ACLFilter{}); err != nil || len(left) != 0 {
			t.Errorf("admin API %d lists %+v, %v after the delete", i, left, err)
		}
	}
}
