package groupsetcd

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/internal/etcdtest"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/wire"
)

// served is a group coordinator over a Log, behind a wire server of its
// own, and a client connection to it.
type served struct {
	t     *testing.T
	log   *Log
	coord *groups.Coordinator
	srv   *wire.Server
	cl    *wire.Client
	once  sync.Once
}

func serve(t *testing.T, cli *clientv3.Client, l txnetcd.Layout, fence txnetcd.Fence, opts Options) *served {
	t.Helper()
	view := cluster.NewView(&cluster.File{ClusterID: "groupsetcd-test", DefaultPartitions: 3, OffsetsPartitions: 5,
		Coordinator: &cluster.Node{NodeID: 0, Addr: "127.0.0.1:9092", KafkaVersion: "4.2"}, Topics: map[string]int32{"in": 3},
		GroupInitialRebalanceDelayMs: new(int32(0))})
	log := Open(txnetcd.NewStore(cli, txnetcd.Options{Layout: l, Partitions: 1}), fence, opts)
	coord, err := groups.Open(groups.Config{NodeID: 0, View: view, Records: log, TickInterval: -1})
	if err != nil {
		t.Fatalf("groups.Open: %v", err)
	}
	reg := wire.NewRegistry()
	coord.Register(reg)
	srv, err := wire.Start(wire.Config{Addr: "127.0.0.1:0", Registry: reg})
	if err != nil {
		coord.Close()
		t.Fatal(err)
	}
	cl, err := wire.Dial(ctxT(t), srv.Addr().String(), "groupsetcd-test")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{t: t, log: log, coord: coord, srv: srv, cl: cl}
	t.Cleanup(s.close)
	return s
}

// close stops the server and closes the coordinator, which closes its
// log.
func (s *served) close() {
	s.once.Do(func() {
		s.cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.srv.Shutdown(ctx)
		s.coord.Close()
	})
}

func (s *served) do(req kmsg.Request, version int16) kmsg.Response {
	s.t.Helper()
	req.SetVersion(version)
	resp, err := s.cl.Do(ctxT(s.t), req)
	if err != nil {
		s.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func (s *served) join(group, member string) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType = group, member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30_000, 30_000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"in"}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	return s.do(req, 9).(*kmsg.JoinGroupResponse)
}

// stable makes group Stable with one member, its leader, at generation
// 1, owning every partition of "in".
func (s *served) stable(group string) string {
	s.t.Helper()
	first := s.join(group, "")
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		s.t.Fatalf("first join: %v", kerr.ErrorForCode(first.ErrorCode))
	}
	j := s.join(group, first.MemberID)
	if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != first.MemberID {
		s.t.Fatalf("join: %v generation %d leader %s", kerr.ErrorForCode(j.ErrorCode), j.Generation, j.LeaderID)
	}
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = group, j.MemberID, 1
	pt, proto := "consumer", "range"
	req.ProtocolType, req.Protocol = &pt, &proto
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "in", []int32{0, 1, 2}
	a.Topics = append(a.Topics, at)
	ga := kmsg.NewSyncGroupRequestGroupAssignment()
	ga.MemberID, ga.MemberAssignment = j.MemberID, a.AppendTo(nil)
	req.GroupAssignment = append(req.GroupAssignment, ga)
	if code := s.do(req, 5).(*kmsg.SyncGroupResponse).ErrorCode; code != 0 {
		s.t.Fatalf("sync: %v", kerr.ErrorForCode(code))
	}
	return j.MemberID
}

// commit commits offsets of "in" (partition → offset) and returns the
// code of the first partition (every partition gets the same here).
func (s *served) commit(group, member string, generation int32, offsets map[int32]int64) int16 {
	s.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "in"
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		meta := "m"
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o, 3, &meta
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := s.do(req, 9).(*kmsg.OffsetCommitResponse)
	code := resp.Topics[0].Partitions[0].ErrorCode
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != code {
			s.t.Fatalf("commit: partition codes differ: %+v", resp.Topics[0].Partitions)
		}
	}
	return code
}

// described is a group's description with commit times in milliseconds,
// as they are stored, so that one loaded can be compared with one held.
func (s *served) described(group string) (string, bool) {
	d, ok := s.coord.DescribeGroup(group)
	for i := range d.Offsets {
		d.Offsets[i].CommitTime = time.UnixMilli(d.Offsets[i].CommitTime.UnixMilli()).UTC()
	}
	b, err := json.Marshal(d)
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b), ok
}

// TestCoordinatorRoundTrip: a group coordinator over etcd serves a
// Stable group with committed offsets, a simple consumer's offsets and a
// deleted group; closed and opened again over a new Log (the same holder
// restarting, or a node taking the coordinator over), it has the same
// groups and offsets, and the Stable group's member still heartbeats in
// its generation. A former holder whose fence was taken over answers
// NOT_COORDINATOR, and its commit never reaches the new holder.
func TestCoordinatorRoundTrip(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l := groupsLayout(t)
	first := serve(t, cli, l, acquire(t, cli, l, 0, 1), Options{})

	member := first.stable("stable")
	if code := first.commit("stable", member, 1, map[int32]int64{0: 10, 1: 20, 2: 30}); code != 0 {
		t.Fatalf("commit of the Stable group: %v", kerr.ErrorForCode(code))
	}
	if code := first.commit("simple", "", -1, map[int32]int64{0: 5}); code != 0 {
		t.Fatalf("commit of the simple consumer: %v", kerr.ErrorForCode(code))
	}
	if code := first.commit("deleted", "", -1, map[int32]int64{1: 7}); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"deleted"}
	if code := first.do(del, 2).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; code != 0 {
		t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(code))
	}
	want := map[string]string{}
	for _, g := range []string{"stable", "simple"} {
		d, ok := first.described(g)
		if !ok {
			t.Fatalf("group %s missing before the move", g)
		}
		want[g] = d
	}
	first.close()
	if err := first.log.Err(); !errors.Is(err, groups.ErrClosed) {
		t.Errorf("the coordinator's Close left its log open: %v", err)
	}

	check := func(s *served, when string) {
		t.Helper()
		for g, w := range want {
			if d, ok := s.described(g); d != w {
				t.Errorf("%s: group %s (found %v):\n got %s\nwant %s", when, g, ok, d, w)
			}
		}
		if _, ok := s.coord.DescribeGroup("deleted"); ok {
			t.Errorf("%s: the deleted group came back", when)
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = "stable", member, 1
		if code := s.do(hb, 4).(*kmsg.HeartbeatResponse).ErrorCode; code != 0 {
			t.Errorf("%s: heartbeat of the Stable group's member: %v", when, kerr.ErrorForCode(code))
		}
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Group = "stable"
		resp := s.do(fetch, 7).(*kmsg.OffsetFetchResponse)
		got := map[int32]int64{}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				got[p.Partition] = p.Offset
			}
		}
		if resp.ErrorCode != 0 || len(got) != 3 || got[0] != 10 || got[1] != 20 || got[2] != 30 {
			t.Errorf("%s: OffsetFetch: %v %v", when, kerr.ErrorForCode(resp.ErrorCode), got)
		}
	}

	// The same holder restarts: the same fence, a new log.
	var fails failures
	failed := make(chan struct{})
	second := serve(t, cli, l, txnetcd.NewFence(0, txnetcd.Owner{NodeID: 0, Epoch: 1}), Options{OnFail: func(err error) {
		fails.onFail(err)
		close(failed)
	}})
	check(second, "after a restart")

	// Node 1 takes the group coordinator over while node 0 still runs it
	// (a zombie): node 0's commit is answered NOT_COORDINATOR.
	takeover := acquire(t, cli, l, 1, 2)
	if code := second.commit("simple", "", -1, map[int32]int64{0: 99}); code != kerr.NotCoordinator.Code {
		t.Errorf("the zombie's commit: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	<-failed
	if err := *fails.err.Load(); !errors.Is(err, txnetcd.ErrNotOwner) {
		t.Errorf("OnFail: %v", err)
	}
	if code := second.commit("simple", "", -1, map[int32]int64{0: 98}); code != kerr.NotCoordinator.Code {
		t.Errorf("the zombie's second commit: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	second.close()
	if n := fails.n.Load(); n != 1 {
		t.Errorf("OnFail called %d times", n)
	}

	third := serve(t, cli, l, takeover, Options{})
	check(third, "after the takeover")
}
