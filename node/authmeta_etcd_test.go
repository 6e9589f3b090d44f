package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/security"
)

// With three coordinators on etcd and security on (`up --coordinators 3
// --secure`), the security metadata is the controller's holder's, in
// etcd: an ACL, a SCRAM user and a finalized transaction.version set
// through the holder survive a SIGKILL-like kill of the holder (node 0
// when it holds the lease, as it does when it starts first). Through
// another node, after the lease moved: DescribeAcls lists the ACL (the new
// holder loaded it from etcd: its Attach replaces what the process held),
// a produce the ACL denies stays denied, the SCRAM user logs in with
// SCRAM-SHA-256, ApiVersions finalizes the level set, and a new ACL is
// created while the old holder is down, then enforced.
func TestSecurityMetadataTakeover(t *testing.T) {
	local, err := security.GenerateLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	local.Settings.TLS = nil
	clusterPw, err := os.ReadFile(local.ClusterPasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	f, listeners := severalCoordinatorsFile(t)
	f.Security = local.Settings
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	e := startEmbeddedFile(t, t.TempDir(), f, listeners)
	waitOwned(t, e, 12)
	holder, epoch := waitController(t, e, -1)
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
	asCluster := sha512(security.LocalClusterUser, strings.TrimSpace(string(clusterPw)))
	addrOf := func(id int32) string { n, _ := e.View.Node(id); return n.Addr }
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
	if err := produce("locked"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("before the kill: the denied produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	t.Logf("killing the controller's holder, node %d (epoch %d)", holder, epoch)
	killCoordinator(t, e, holder)
	next, nextEpoch := waitController(t, e, holder)
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
	if err := produce("locked-too"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("the produce the new ACL denies: %v, want TOPIC_AUTHORIZATION_FAILED", err)
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
