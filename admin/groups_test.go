package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeGroupsBackend is a Backend with a group coordinator.
type fakeGroupsBackend struct {
	fakeBackend
	groups map[string]GroupDetail
}

func (f *fakeGroupsBackend) Groups(context.Context) ([]GroupSummary, error) {
	var out []GroupSummary
	for _, g := range f.groups {
		out = append(out, g.GroupSummary)
	}
	return out, nil
}

func (f *fakeGroupsBackend) Group(_ context.Context, id string) (GroupDetail, error) {
	g, ok := f.groups[id]
	if !ok {
		return g, fmt.Errorf("%w: %q", ErrGroupNotFound, id)
	}
	return g, nil
}

func (f *fakeGroupsBackend) DeleteGroup(_ context.Context, id string) error {
	g, ok := f.groups[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", ErrGroupNotFound, id)
	case g.MemberCount > 0:
		return fmt.Errorf("%w: group %q is not empty", ErrConflict, id)
	}
	delete(f.groups, id)
	return nil
}

// The groups endpoints through the client: list, describe, delete (404 for
// an unknown group, 409 for one with members); a node without a group
// coordinator answers 404 saying so.
func TestGroupsEndpoints(t *testing.T) {
	b := &fakeGroupsBackend{groups: map[string]GroupDetail{
		"busy": {GroupSummary: GroupSummary{Group: "busy", State: "Stable", MemberCount: 1},
			Members: []GroupMember{{MemberID: "m1", Assignment: []TopicPartition{{"orders", 0}}}}},
		"idle": {GroupSummary: GroupSummary{Group: "idle", State: "Empty"}},
	}}
	srv := httptest.NewServer(Handler(b, prometheus.NewRegistry()))
	defer srv.Close()
	cl := NewClient(srv.URL)
	ctx := context.Background()
	gs, err := cl.Groups(ctx)
	if err != nil || len(gs) != 2 {
		t.Fatalf("Groups: %+v %v", gs, err)
	}
	g, err := cl.Group(ctx, "busy")
	if err != nil || g.State != "Stable" || len(g.Members) != 1 || g.Members[0].Assignment[0] != (TopicPartition{"orders", 0}) {
		t.Fatalf("Group: %+v %v", g, err)
	}
	var ae *APIError
	if err := cl.DeleteGroup(ctx, "busy"); !errors.As(err, &ae) || ae.Status != 409 {
		t.Fatalf("delete a group with members: %v", err)
	}
	if _, err := cl.Group(ctx, "nope"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("unknown group: %v", err)
	}
	if err := cl.DeleteGroup(ctx, "idle"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := cl.Group(ctx, "idle"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("deleted group: %v", err)
	}

	plain := httptest.NewServer(Handler(&fakeBackend{}, prometheus.NewRegistry()))
	defer plain.Close()
	if _, err := NewClient(plain.URL).Groups(ctx); !errors.As(err, &ae) || ae.Status != 404 || ae.Message != errNoGroups.Error() {
		t.Fatalf("node without groups: %v", err)
	}
}

// Lag: log end minus the committed offset; an assigned partition without
// a commit is a row with CurrentOffset -1; a partition whose end is
// unknown has -1 for both; rows sorted, with their member.
func TestLag(t *testing.T) {
	d := GroupDetail{
		Members: []GroupMember{{MemberID: "m1", Host: "/10.0.0.1", ClientID: "c1", Assignment: []TopicPartition{{"orders", 1}, {"orders", 0}}}},
		Offsets: []GroupOffset{{Topic: "orders", Partition: 0, CurrentOffset: 40}, {Topic: "audit", Partition: 3, CurrentOffset: 7}},
	}
	Lag(&d, map[TopicPartition]int64{{"orders", 0}: 42, {"orders", 1}: 5})
	want := []GroupOffset{
		{Topic: "audit", Partition: 3, CurrentOffset: 7, LogEndOffset: -1, Lag: -1},
		{Topic: "orders", Partition: 0, CurrentOffset: 40, LogEndOffset: 42, Lag: 2, MemberID: "m1", Host: "/10.0.0.1", ClientID: "c1"},
		{Topic: "orders", Partition: 1, CurrentOffset: -1, LogEndOffset: 5, Lag: -1, MemberID: "m1", Host: "/10.0.0.1", ClientID: "c1"},
	}
	if !reflect.DeepEqual(d.Offsets, want) {
		t.Fatalf("offsets\n%+v\nwant\n%+v", d.Offsets, want)
	}
}
