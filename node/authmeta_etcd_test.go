package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/security"
	"github.com/txncoord/txncoord/topicsetcd"
)

// takeoverCluster is a cluster of three coordinators on etcd (nodes 0-2)
// and two leaders (3, 4) with security on, as securityTakeover drives it.
type takeoverCluster struct {
	addrOf func(id int32) string
	// holder waits until a coordinator other than not (-1: any) runs
	// the controller and returns it with its lease's epoch.
	holder func(not int32) (int32, int32)
	kill   func(id int32)
	// inEtcd, optional, checks what etcd holds once the holder moved.
	inEtcd func()
}

// secureSeveralFile is severalCoordinatorsFile with security on (without
// TLS), its generated credentials, and the cluster user's password.
func secureSeveralFile(t *testing.T) (*cluster.File, map[int32]net.Listener, *security.Local, string) {
	t.Helper()
	local, clusterPw := localSecurity(t)
	f, listeners := severalCoordinatorsFile(t)
	f.Security = local.Settings
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f, listeners, local, clusterPw
}

// localSecurity is `up --secure`'s generated security, without TLS, and
// the cluster user's password.
func localSecurity(t *testing.T) (*security.Local, string) {
	t.Helper()
	local, err := security.GenerateLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	local.Settings.TLS = nil
	clusterPw, err := os.ReadFile(local.ClusterPasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	return local, strings.TrimSpace(string(clusterPw))
}

// With three coordinators on etcd and security on (`up --coordinators 3
// --secure`), the security metadata is the controller's holder's, in
// etcd: an ACL, a SCRAM user and a finalized transaction.version set
// through the holder survive the kill of the holder (node 0 when it holds
// the lease, as it does when it starts first). Through another node,
// after the lease moved: DescribeAcls lists the ACL, a produce the ACL
// denies stays denied, the SCRAM user logs in with SCRAM-SHA-256,
// ApiVersions finalizes the level set, and a new ACL is created while the
// old holder is down, then enforced. etcd holds every record under the
// controller's prefix.
func TestSecurityMetadataTakeover(t *testing.T) {
	f, listeners, local, clusterPw := secureSeveralFile(t)
	e := startEmbeddedFile(t, t.TempDir(), f, listeners)
	waitOwned(t, e, 12)
	securityTakeover(t, local, clusterPw, takeoverCluster{
		addrOf: func(id int32) string { n, _ := e.View.Node(id); return n.Addr },
		holder: func(not int32) (int32, int32) { return waitController(t, e, not) },
		kill:   func(id int32) { killCoordinator(t, e, id) },
		inEtcd: func() {
			t.Helper()
			kinds := map[string]int{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := topicsetcd.Snapshot(ctx, e.etcdClient, controllerLayout(e.View), topicsetcd.AuthMeta, func(raw []byte) error {
				kind, _, _, err := authmeta.RecordKey(raw)
				kinds[kind]++
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{"acl": 2, "scram": 1, "feature": 1}; !maps.Equal(kinds, want) {
				t.Fatalf("etcd holds the security records %v, want %v", kinds, want)
			}
		},
	})
}

// TestSecurityMetadataTakeoverSeparate is TestSecurityMetadataTakeover
// with every coordinator and leader a process of its own (each its own
// view and store; the followers mirror the holder, the SCRAM logins of
// other nodes are relayed to it); the holder stops.
func TestSecurityMetadataTakeoverSeparate(t *testing.T) {
	f, lns, local, clusterPw := secureSeveralFile(t)
	var mu sync.Mutex
	coords, _ := startSeparateCoordinators(t, f, lns, &mu)
	securityTakeover(t, local, clusterPw, takeoverCluster{
		addrOf: func(id int32) string { n, _ := cluster.NewView(f).Node(id); return n.Addr },
		holder: func(not int32) (int32, int32) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				for id, co := range coords {
					if id == not || co.ctl.Current() == nil {
						continue
					}
					if h, epoch, ok := co.ctl.Holder(); ok && h == id {
						mu.Unlock()
						return id, epoch
					}
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
			t.Fatalf("no coordinator (other than %d) runs the controller", not)
			return 0, 0
		},
		kill: func(id int32) {
			mu.Lock()
			co := coords[id]
			delete(coords, id)
			mu.Unlock()
			stopWithin(t, co.Stop)
		},
	})
}

// startSeparateCoordinators starts every coordinator and leader of f as a
// process of its own (its own view; the coordinators' stores under
// DATA_DIR/c<id>, leases of one second) and stops the coordinators in the
// map at the end of the test (under mu, nil: none). start starts
// coordinator id again on ln, on its store (the caller puts it in the map).
func startSeparateCoordinators(t *testing.T, f *cluster.File, lns map[int32]net.Listener, mu *sync.Mutex) (coords map[int32]*Coordinator, start func(id int32, ln net.Listener) *Coordinator) {
	t.Helper()
	if mu == nil {
		mu = new(sync.Mutex)
	}
	dir := t.TempDir()
	start = func(id int32, ln net.Listener) *Coordinator {
		t.Helper()
		co, err := StartCoordinator(CoordinatorConfig{View: cluster.NewView(f), DataDir: filepath.Join(dir, fmt.Sprint("c", id)), NodeID: id,
			Listener: ln, LeaseTTL: time.Second, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		return co
	}
	coords = map[int32]*Coordinator{}
	for _, n := range f.Coordinators {
		coords[n.NodeID] = start(n.NodeID, lns[n.NodeID])
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, co := range coords {
			stopWithin(t, co.Stop)
		}
	})
	for _, n := range f.Leaders {
		l, err := StartLeader(LeaderConfig{View: cluster.NewView(f), NodeID: n.NodeID, DataDir: dir, Listener: lns[n.NodeID], Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopWithin(t, l.Stop) })
	}
	return coords, start
}

// securityTakeover is the scenario of TestSecurityMetadataTakeover on c.
func securityTakeover(t *testing.T, local *security.Local, clusterPw string, c takeoverCluster) {
	holder, epoch := c.holder(-1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	client := func(addr string, mech kgo.Opt, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), mech, kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	sha512 := func(user, pass string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
	}
	asCluster := sha512(security.LocalClusterUser, clusterPw)
	addrOf := c.addrOf
	// eventually retries fn (NOT_CONTROLLER while the lease moves) until
	// it succeeds or 30 s passed.
	eventually := func(what string, fn func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := fn()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	denyWrite := func(cl *kgo.Client, node int32, topic string) error {
		req := kmsg.NewPtrCreateACLsRequest()
		req.SetVersion(3)
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:"+local.ClientUser, "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny
		req.Creations = append(req.Creations, c)
		resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Results[0].ErrorCode)
	}
	deniedTopics := func(cl *kgo.Client, node int32) ([]string, error) {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.SetVersion(2)
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			return nil, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		var out []string
		for _, r := range resp.Resources {
			for _, a := range r.ACLs {
				if a.PermissionType == kmsg.ACLPermissionTypeDeny && a.Principal == "User:"+local.ClientUser {
					out = append(out, r.ResourceName)
				}
			}
		}
		slices.Sort(out)
		return out, nil
	}
	finalized := func(cl *kgo.Client, node int32) (int16, error) {
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			return 0, err
		}
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" {
				return f.MaxVersionLevel, nil
			}
		}
		return -1, nil
	}
	// produce is the client user's produce of one record to topic through
	// node's listener.
	produce := func(topic string) error {
		cl := client(addrOf(3), sha512(local.ClientUser, local.ClientPassword), kgo.DefaultProduceTopic(topic),
			kgo.AllowAutoTopicCreation())
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}

	// Through the holder: a deny ACL, a SCRAM-SHA-256 user, and
	// transaction.version downgraded to 1.
	atHolder := client(addrOf(holder), asCluster)
	if err := denyWrite(atHolder, holder, "locked"); err != nil {
		t.Fatalf("CreateAcls at the holder %d: %v", holder, err)
	}
	adm := kadm.NewClient(atHolder)
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"}})
	if err == nil {
		err = altered.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserScramCredentials: %v", err)
	}
	up := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 1, 2 // safe downgrade
	up.FeatureUpdates = append(up.FeatureUpdates, u)
	uresp, err := up.RequestWith(ctx, atHolder.Broker(int(holder)))
	if err == nil {
		err = kerr.ErrorForCode(uresp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("UpdateFeatures: %v", err)
	}
	// A leader in a process of its own enforces the ACL once it mirrored
	// it from the holder.
	eventually("before the kill: the denied produce", func() error {
		if err := produce("locked"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			return fmt.Errorf("%v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		return nil
	})

	t.Logf("killing the controller's holder, node %d (epoch %d)", holder, epoch)
	c.kill(holder)
	next, nextEpoch := c.holder(holder)
	if nextEpoch <= epoch {
		t.Fatalf("the lease moved to %d at epoch %d, not above %d", next, nextEpoch, epoch)
	}
	other := int32(3) // a leader: it forwards to the holder
	atOther := client(addrOf(other), asCluster)
	eventually("DescribeAcls through a leader after the takeover", func() error {
		got, err := deniedTopics(atOther, other)
		if err == nil && !slices.Equal(got, []string{"locked"}) {
			err = fmt.Errorf("denied topics %v, want [locked]", got)
		}
		return err
	})
	if err := produce("locked"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("after the kill: the denied produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := produce("open"); err != nil {
		t.Fatalf("after the kill: a produce no ACL denies: %v", err)
	}
	alice := client(addrOf(next), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()))
	if err := alice.Ping(ctx); err != nil {
		t.Fatalf("alice's SCRAM-SHA-256 login at the new holder %d: %v", next, err)
	}
	aliceAtLeader := client(addrOf(other), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()))
	if err := aliceAtLeader.Ping(ctx); err != nil {
		t.Fatalf("alice's SCRAM-SHA-256 login at leader %d: %v", other, err)
	}
	if level, err := finalized(atOther, other); err != nil || level != 1 {
		t.Fatalf("transaction.version finalized at %d (%v) after the takeover, want 1", level, err)
	}
	atNext := client(addrOf(next), asCluster)
	if level, err := finalized(atNext, next); err != nil || level != 1 {
		t.Fatalf("the new holder %d finalizes transaction.version %d (%v), want 1", next, level, err)
	}
	// A new ACL while the old holder is down, through a leader.
	eventually("CreateAcls through a leader while the old holder is down", func() error { return denyWrite(atOther, other, "locked-too") })
	eventually("DescribeAcls after the new ACL", func() error {
		got, err := deniedTopics(atNext, next)
		if err == nil && !slices.Equal(got, []string{"locked", "locked-too"}) {
			err = fmt.Errorf("denied topics %v, want [locked locked-too]", got)
		}
		return err
	})
	eventually("the produce the new ACL denies", func() error {
		if err := produce("locked-too"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			return fmt.Errorf("%v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		return nil
	})
	if c.inEtcd != nil {
		c.inEtcd()
	}
}

// startEmbeddedFile starts `up` on file f with listeners, its leases of
// one second, and stops it at the end of the test.
func startEmbeddedFile(t *testing.T, dir string, f *cluster.File, listeners map[int32]net.Listener) *Embedded {
	t.Helper()
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: listeners, MarkerVersionDiscovery: true,
		LeaseTTL: time.Second, Log: zerolog.Nop()})
	if err != nil {
		for _, ln := range listeners {
			ln.Close()
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return e
}
