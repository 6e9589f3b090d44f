package leaderstub

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/wire"
)

// fakeCoordinator is a small coordinator node on wire with hand-written
// handlers: Metadata and FindCoordinator from the view, InitProducerId
// (allocates ids) and AddPartitionsToTxn v0–v5 answered by the twin's logic.
// It records the version of every request it received.
type fakeCoordinator struct {
	twin     *twinCoordinator
	srv      *wire.Server
	mu       sync.Mutex
	versions map[int16][]int16
}

func (fc *fakeCoordinator) seen(key, version int16) {
	fc.mu.Lock()
	fc.versions[key] = append(fc.versions[key], version)
	fc.mu.Unlock()
}

func (fc *fakeCoordinator) versionsOf(key int16) []int16 {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]int16(nil), fc.versions[key]...)
}

func startFakeCoordinator(t *testing.T, ln net.Listener, view *cluster.View, initMax, addMax int16) *fakeCoordinator {
	fc := &fakeCoordinator{twin: newTwin(), versions: map[int16][]int16{}}
	reg := wire.NewRegistry()
	view.RegisterMetadata(reg)
	view.RegisterFindCoordinator(reg)
	reg.Register(22, 0, initMax, func(ctx context.Context, r *wire.Request) wire.Reply {
		fc.seen(22, r.Version)
		resp, _ := fc.twin.InitProducerID(ctx, r.Body.(*kmsg.InitProducerIDRequest))
		return wire.Now(resp)
	})
	reg.Register(24, 0, addMax, func(ctx context.Context, r *wire.Request) wire.Reply {
		fc.seen(24, r.Version)
		req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
		if r.Version < 4 {
			resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return wire.Now(resp)
		}
		resp, _ := fc.twin.AddPartitionsToTxn(ctx, req)
		return wire.Now(resp)
	})
	prof, _ := negotiation.Profile("4.2")
	srv, err := wire.Start(wire.Config{Listener: ln, Registry: reg, Profile: prof, Log: zerolog.Nop(),
		Features: func() wire.Features { return view.Features("4.2") }})
	if err != nil {
		t.Fatal(err)
	}
	fc.srv = srv
	t.Cleanup(func() { shutdown(srv) })
	return fc
}

func shutdown(srv *wire.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
}

// testCluster is a fake coordinator (node 0) and one real leader (node 1)
// listening on 127.0.0.1, built as the node assembly will build them.
type testCluster struct {
	view        *cluster.View
	coordAddr   string
	leaderAddr  string
	coord       *fakeCoordinator
	leader      *Leader
	leaderSrv   *wire.Server
	leaderLn    net.Listener
	dir         string
	leaderVer   string
	topicID     [16]byte
	dialedCoord coordclient.Client
}

func listen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func startCluster(t *testing.T, leaderVersion string) *testCluster {
	coordLn, leaderLn := listen(t), listen(t)
	tc := &testCluster{coordAddr: coordLn.Addr().String(), leaderAddr: leaderLn.Addr().String(), dir: t.TempDir(), leaderVer: leaderVersion}
	f := testFile([]cluster.Node{{NodeID: 1, Addr: tc.leaderAddr, KafkaVersion: leaderVersion}}, map[string]int32{"t": 1, "u": 2})
	f.Coordinator.Addr = tc.coordAddr
	tc.view = cluster.NewView(f)
	topic, _ := tc.view.Topic("t")
	tc.topicID = topic.ID
	tc.coord = startFakeCoordinator(t, coordLn, tc.view, 5, 5)
	tc.dialedCoord = coordclient.Dial(tc.coordAddr, zerolog.Nop())
	tc.leaderLn = leaderLn
	tc.startLeader(t)
	t.Cleanup(func() { tc.stopLeader() })
	return tc
}

func (tc *testCluster) startLeader(t *testing.T) {
	l, err := Open(Config{NodeID: 1, KafkaVersion: tc.leaderVer, View: tc.view, DataDir: tc.dir,
		Coordinator: tc.dialedCoord, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	reg := wire.NewRegistry()
	tc.view.RegisterMetadata(reg)
	tc.view.RegisterFindCoordinator(reg)
	l.Register(reg)
	prof, _ := negotiation.Profile(tc.leaderVer)
	ver := tc.leaderVer
	srv, err := wire.Start(wire.Config{Listener: tc.leaderLn, Registry: reg, Profile: prof, Log: zerolog.Nop(),
		Features: func() wire.Features { return tc.view.Features(ver) }})
	if err != nil {
		t.Fatal(err)
	}
	tc.leader, tc.leaderSrv = l, srv
}

func (tc *testCluster) stopLeader() {
	if tc.leaderSrv != nil {
		shutdown(tc.leaderSrv)
		tc.leader.Close()
		tc.leaderSrv = nil
	}
}

// dialLeader opens a raw node-to-node connection to the leader.
func (tc *testCluster) dialLeader(t *testing.T) *wire.Client {
	cl, err := wire.Dial(context.Background(), tc.leaderAddr, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func do[R kmsg.Response](t *testing.T, cl *wire.Client, req kmsg.Request, version int16) R {
	t.Helper()
	req.SetVersion(version)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Do(ctx, req)
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp.(R)
}
