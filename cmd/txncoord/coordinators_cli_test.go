package main

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/txncoord/txncoord/admin"
)

// `txncoord coordinators` runs in-process against an admin API served from
// memory, as the other admin commands in cli_test.go.

// fakeCoordinatorsAdmin is fakeAdminBackend on a node that reports the
// cluster's coordinators.
type fakeCoordinatorsAdmin struct {
	fakeAdminBackend
	coordinators []admin.CoordinatorStatus
}

func (f *fakeCoordinatorsAdmin) Coordinators(context.Context) ([]admin.CoordinatorStatus, error) {
	return f.coordinators, nil
}

// owned is partitions at one epoch.
func owned(epoch int32, partitions ...int32) []admin.PartitionOwnership {
	out := make([]admin.PartitionOwnership, 0, len(partitions))
	for _, p := range partitions {
		out = append(out, admin.PartitionOwnership{Partition: p, Epoch: epoch})
	}
	return out
}

// Three coordinators over 50 partitions, answered by node 1: node 0 owns
// 20 at epoch 1 and two it took over (epoch 3), node 1 the other 28 at
// epoch 2 and serves all but one (still loading), node 2 is dead and owns
// nothing. Node 1's epochs are too long for a cell: cut in the middle.
func TestCoordinatorsCommand(t *testing.T) {
	var node0, node1 []admin.PartitionOwnership
	for p := int32(0); p < 50; p++ {
		switch {
		case p == 20 || p == 21:
			node0 = append(node0, owned(3, p)...)
		case p%3 == 0 || p < 6:
			node0 = append(node0, owned(1, p)...)
		default:
			node1 = append(node1, owned(2, p)...)
		}
	}
	b := &fakeCoordinatorsAdmin{coordinators: []admin.CoordinatorStatus{
		{NodeID: 2, Addr: "127.0.0.1:9094", KafkaVersion: "4.2", Serving: -1},
		{NodeID: 0, Addr: "127.0.0.1:9092", KafkaVersion: "4.2", Live: true, Serving: -1, Partitions: node0},
		{NodeID: 1, Addr: "127.0.0.1:9093", KafkaVersion: "4.1", Live: true, Self: true, Serving: len(node1) - 1, Partitions: node1},
	}}
	url := startFakeAdmin(t, b, "")

	stdout, stderr, code := runInProc(t, "coordinators", "--admin", url)
	if code != 0 || stderr != "" {
		t.Fatalf("coordinators: exit %d: %s", code, stderr)
	}
	want := []string{
		"NodeId  Addr            KafkaVersion  Live   Self   Partitions  Serving  Epochs",
		"0       127.0.0.1:9092  4.2           true   false  22          -        0-6,9,12,15,18,24,27,30,33,36,39,42,45,48@1 20-21@3",
		"1       127.0.0.1:9093  4.1           true   true   28          27       7-8,10-11,13-14,16-17,19,22-23,25-26,28-29…0-41,43-44,46-47,49@2",
		"2       127.0.0.1:9094  4.2           false  false  0           -        -",
	}
	if got := lines(stdout); !reflect.DeepEqual(got, want) {
		t.Fatalf("table:\n%s\nwant:\n%s", stdout, strings.Join(want, "\n"))
	}
	// --wide: the whole of node 1's epochs.
	stdout, _, _ = runInProc(t, "coordinators", "--wide", "--admin", url)
	if !strings.Contains(stdout, " 7-8,10-11,13-14,16-17,19,22-23,25-26,28-29,31-32,34-35,37-38,40-41,43-44,46-47,49@2\n") {
		t.Fatalf("--wide does not show node 1's partitions whole:\n%s", stdout)
	}

	stdout, stderr, code = runInProc(t, "coordinators", "-o", "json", "--admin", url)
	if code != 0 || stderr != "" {
		t.Fatalf("coordinators -o json: exit %d: %s", code, stderr)
	}
	var got []admin.CoordinatorStatus
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(got) != 3 || got[0].NodeID != 0 || !reflect.DeepEqual(got[1].Partitions, node1) || got[2].Partitions == nil || got[1].Serving != 27 {
		t.Fatalf("json: %+v", got)
	}
	if !strings.Contains(stdout, `"partitions": []`) {
		t.Fatalf("a coordinator owning nothing is not \"partitions\": []:\n%s", stdout)
	}
}

// Refusals: one line on stderr, exit 1 for what the API or the network
// says, 2 for the caller's mistakes, as the other admin commands.
func TestCoordinatorsCommandErrors(t *testing.T) {
	plain := startFakeAdmin(t, &fakeAdminBackend{}, "")
	secured := startFakeAdmin(t, &fakeCoordinatorsAdmin{}, "s3cret")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--admin", plain}, 1, "txncoord: admin API: this coordinator does not report coordinators (HTTP 404)"},
		{[]string{"--admin", secured}, 1, "(HTTP 401); give --token or TXNCOORD_ADMIN_TOKEN"},
		{[]string{"--admin", "http://127.0.0.1:1"}, 1, "txncoord: admin API at http://127.0.0.1:1 unreachable"},
		{[]string{"--admin", plain, "-o", "yaml"}, 2, `txncoord: -o "yaml": want table or json`},
		{[]string{"--admin", plain, "node-0"}, 2, `txncoord: unexpected argument "node-0": txncoord coordinators takes named flags only`},
	}
	for _, tc := range cases {
		stdout, stderr, code := runInProc(t, append([]string{"coordinators"}, tc.args...)...)
		if code != tc.code || stdout != "" || len(lines(stderr)) != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("coordinators %v: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", tc.args, code, stdout, stderr, tc.code, tc.want)
		}
	}
	// An empty cluster's table is its header.
	stdout, _, code := runInProc(t, "coordinators", "--admin", secured, "--token", "s3cret")
	if code != 0 || stdout != "NodeId  Addr  KafkaVersion  Live  Self  Partitions  Serving  Epochs\n" {
		t.Fatalf("empty: exit %d, %q", code, stdout)
	}
}

func TestEpochsString(t *testing.T) {
	cases := []struct {
		parts []admin.PartitionOwnership
		want  string
	}{
		{nil, "-"},
		{owned(3, 0), "0@3"},
		{owned(3, 4, 0, 1, 2, 9), "0-2,4,9@3"},
		{append(owned(5, 7), append(owned(3, 0, 4), owned(4, 1)...)...), "0,4@3 1@4 7@5"},
		{append(owned(1, 49, 48, 47), owned(2, 46)...), "47-49@1 46@2"},
	}
	for _, tc := range cases {
		if got := epochsString(tc.parts); got != tc.want {
			t.Errorf("epochsString(%v) = %q, want %q", tc.parts, got, tc.want)
		}
	}
}
