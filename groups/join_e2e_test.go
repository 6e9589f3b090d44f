package groups_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A member's repeated JoinGroup while its earlier one waits, over raw
// connections to an embedded cluster (each request written by hand, so
// the test chooses which connection carries it and can pipeline them).
// Kafka's ClassicGroup.updateMember replaces the waiting future and never
// completes the earlier one (kfake does the same): the earlier request
// gets no response, where txncoord answered it REBALANCE_IN_PROGRESS.

// rawConn is a Kafka connection driven by hand.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
	sent map[int32]kmsg.Request
	f    *kmsg.RequestFormatter
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, sent: map[int32]kmsg.Request{}, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-join"))}
}

// send writes req at version v and returns its correlation id.
func (r *rawConn) send(req kmsg.Request, v int16) int32 {
	r.t.Helper()
	r.corr++
	req.SetVersion(v)
	r.sent[r.corr] = req
	if _, err := r.c.Write(r.f.AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatal(err)
	}
	return r.corr
}

// read reads the next response and returns its correlation id and body.
func (r *rawConn) read() (int32, kmsg.Response) {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		r.t.Fatalf("read: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, b); err != nil {
		r.t.Fatalf("read: %v", err)
	}
	corr := int32(binary.BigEndian.Uint32(b))
	req, ok := r.sent[corr]
	if !ok {
		r.t.Fatalf("response to correlation id %d, which was not sent", corr)
	}
	delete(r.sent, corr)
	b = b[4:]
	if req.IsFlexible() && req.Key() != 18 {
		b = b[1:] // response header v1: no tagged fields
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(b); err != nil {
		r.t.Fatalf("decode %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return corr, resp
}

// roundTrip sends req and reads its response.
func (r *rawConn) roundTrip(req kmsg.Request, v int16) kmsg.Response {
	r.t.Helper()
	want := r.send(req, v)
	got, resp := r.read()
	if got != want {
		r.t.Fatalf("response %d, want %d", got, want)
	}
	return resp
}

func joinReq(group, member string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType = group, member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30_000, 30_000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"in"}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	return req
}

// newMember joins group with KIP-394's two steps up to the point where it
// waits: it returns the member id given with MEMBER_ID_REQUIRED.
func (r *rawConn) memberID(group string) string {
	r.t.Helper()
	resp := r.roundTrip(joinReq(group, ""), 9).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
		r.t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED with an id", resp.ErrorCode, resp.MemberID)
	}
	return resp.MemberID
}

func syncReq(group, member string, gen int32, assign map[string][]int32) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	pt, p := "consumer", "range"
	req.ProtocolType, req.Protocol = &pt, &p
	for m, parts := range assign {
		a := kmsg.NewConsumerMemberAssignment()
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = "in", parts
		a.Topics = append(a.Topics, t)
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = m, a.AppendTo(nil)
		req.GroupAssignment = append(req.GroupAssignment, sa)
	}
	return req
}

// stableOfOne makes a group whose one member (on r) is its leader at
// generation 1, Stable.
func stableOfOne(t *testing.T, r *rawConn, group string) string {
	t.Helper()
	ma := r.memberID(group)
	j := r.roundTrip(joinReq(group, ma), 9).(*kmsg.JoinGroupResponse)
	if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != ma {
		t.Fatalf("join of the first member: %+v", j)
	}
	s := r.roundTrip(syncReq(group, ma, 1, map[string][]int32{ma: {0, 1, 2, 3, 4, 5}}), 5).(*kmsg.SyncGroupResponse)
	if s.ErrorCode != 0 {
		t.Fatalf("sync of the first member: %v", kerr.ErrorForCode(s.ErrorCode))
	}
	return ma
}

func checkJoined(t *testing.T, what string, resp kmsg.Response, member, leader string, gen int32, members int) {
	t.Helper()
	j := resp.(*kmsg.JoinGroupResponse)
	if j.ErrorCode != 0 || j.MemberID != member || j.LeaderID != leader || j.Generation != gen || len(j.Members) != members {
		t.Errorf("%s: code %v member %s leader %s generation %d members %d, want no error, %s, leader %s, generation %d, %d members",
			what, kerr.ErrorForCode(j.ErrorCode), j.MemberID, j.LeaderID, j.Generation, len(j.Members), member, leader, gen, members)
	}
}

// TestRepeatedJoinOnAnotherConnection: member B's JoinGroup waits on one
// connection; B joins again on another (a retry after a timeout), then
// the leader rejoins: the second gets generation 2, and the first no
// response at all (the next response on its connection is that of a
// later request); B then syncs and the group is Stable.
func TestRepeatedJoinOnAnotherConnection(t *testing.T) {
	tc := startCluster(t)
	const group = "rejoin-other"
	a, b, c := dialRaw(t, tc.addrs[0]), dialRaw(t, tc.addrs[0]), dialRaw(t, tc.addrs[0])
	ma := stableOfOne(t, a, group)
	mb := b.memberID(group)
	first := b.send(joinReq(group, mb), 9)
	// The first join has been handled once the group prepares a
	// rebalance (it was Stable).
	adm := kadm.NewClient(tc.client())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		d, err := adm.DescribeGroups(ctx, group)
		if err == nil && d[group].State == "PreparingRebalance" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group never prepared a rebalance: %v %v", d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// B again, then the leader, pipelined on the third connection: the
	// server handles them in this order.
	again := c.send(joinReq(group, mb), 9)
	leader := c.send(joinReq(group, ma), 9)
	for _, want := range []int32{again, leader} {
		got, resp := c.read()
		if got != want {
			t.Fatalf("third connection: response %d, want %d", got, want)
		}
		if got == again {
			checkJoined(t, "B's second join", resp, mb, ma, 2, 0)
		} else {
			checkJoined(t, "the leader's join", resp, ma, ma, 2, 2)
		}
	}
	probe := b.send(kmsg.NewPtrApiVersionsRequest(), 3)
	got, resp := b.read()
	if got == first {
		t.Fatalf("B's first join was answered (%v); Kafka never answers a join another one replaced",
			kerr.ErrorForCode(resp.(*kmsg.JoinGroupResponse).ErrorCode))
	}
	if got != probe {
		t.Fatalf("B's connection: response %d, want %d", got, probe)
	}

	syncB := c.send(syncReq(group, mb, 2, nil), 5)
	s := a.roundTrip(syncReq(group, ma, 2, map[string][]int32{ma: {0, 1, 2}, mb: {3, 4, 5}}), 5).(*kmsg.SyncGroupResponse)
	if s.ErrorCode != 0 {
		t.Fatalf("leader's sync: %v", kerr.ErrorForCode(s.ErrorCode))
	}
	if got, resp := c.read(); got != syncB || resp.(*kmsg.SyncGroupResponse).ErrorCode != 0 || len(resp.(*kmsg.SyncGroupResponse).MemberAssignment) == 0 {
		t.Fatalf("B's sync: %d %+v", got, resp)
	}
	d, err := adm.DescribeGroups(ctx, group)
	if err != nil || d[group].State != "Stable" || len(d[group].Members) != 2 {
		t.Fatalf("group after the syncs: %+v %v", d[group], err)
	}
}

// TestRepeatedJoinPipelined: B's two joins and then the leader's,
// pipelined on one connection. Kafka reads nothing more from a connection
// while a request waits, so it would answer the first join with
// generation 2 and then find the second, with the same protocols, in the
// same generation: both get generation 2, in order.
func TestRepeatedJoinPipelined(t *testing.T) {
	tc := startCluster(t)
	const group = "rejoin-pipelined"
	a, b := dialRaw(t, tc.addrs[0]), dialRaw(t, tc.addrs[0])
	ma := stableOfOne(t, a, group)
	mb := b.memberID(group)
	first := b.send(joinReq(group, mb), 9)
	second := b.send(joinReq(group, mb), 9)
	leader := b.send(joinReq(group, ma), 9)
	for _, want := range []int32{first, second, leader} {
		got, resp := b.read()
		if got != want {
			t.Fatalf("response %d, want %d", got, want)
		}
		switch got {
		case first:
			checkJoined(t, "B's first join", resp, mb, ma, 2, 0)
		case second:
			checkJoined(t, "B's second join", resp, mb, ma, 2, 0)
		default:
			checkJoined(t, "the leader's join", resp, ma, ma, 2, 2)
		}
	}
}
