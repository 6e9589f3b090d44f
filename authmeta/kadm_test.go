package authmeta_test

import (
	"context"
	"errors"
	"net"
	"os"
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
	"github.com/txncoord/txncoord/node"
	"github.com/txncoord/txncoord/security"
)

// secureCluster is `txncoord up --secure` in-process (SASL over plaintext,
// the generated users): a coordinator and two leaders.
type secureCluster struct {
	t         *testing.T
	dir       string
	local     *security.Local
	clusterPw string
	file      *cluster.File
	e         *node.Embedded
	// adminAddr, when set, is the admin API's listener.
	adminAddr string
}

func startSecure(t *testing.T) *secureCluster {
	t.Helper()
	local, err := security.GenerateLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	local.Settings.TLS = nil
	pw, err := os.ReadFile(local.ClusterPasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	sc := &secureCluster{t: t, dir: t.TempDir(), local: local, clusterPw: strings.TrimSpace(string(pw))}
	sc.start()
	t.Cleanup(sc.stop)
	return sc
}

// start starts the cluster on new ports over sc.dir.
func (sc *secureCluster) start() {
	t := sc.t
	t.Helper()
	lns := map[int32]net.Listener{}
	addr := map[int32]string{}
	for id := int32(0); id <= 2; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id], addr[id] = ln, ln.Addr().String()
	}
	sc.file = &cluster.File{ClusterID: "authmeta-test", DefaultPartitions: 2,
		Coordinator:                  &cluster.Node{NodeID: 0, Addr: addr[0], KafkaVersion: "4.2"},
		Topics:                       map[string]int32{"orders": 2, "secret": 1, "fresh": 1},
		GroupInitialRebalanceDelayMs: new(int32(0))}
	if sc.local != nil {
		sc.file.Security = sc.local.Settings
	}
	for id := int32(1); id <= 2; id++ {
		sc.file.Leaders = append(sc.file.Leaders, cluster.Node{NodeID: id, Addr: addr[id], KafkaVersion: "4.2"})
	}
	if err := sc.file.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := node.StartEmbedded(node.EmbeddedConfig{File: sc.file, DataDir: sc.dir, Listeners: lns, MarkerVersionDiscovery: true,
		AdminListen: sc.adminAddr, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	sc.e = e
}

func (sc *secureCluster) stop() {
	if sc.e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := sc.e.Stop(ctx); err != nil {
		sc.t.Errorf("Stop: %v", err)
	}
	sc.e = nil
}

// as is a client of user (SCRAM-SHA-512) seeded with every node, so
// that requests reach leaders and the coordinator alike.
func (sc *secureCluster) as(user, pass string, opts ...kgo.Opt) *kgo.Client {
	sc.t.Helper()
	seeds := []string{sc.file.Coordinator.Addr}
	for _, l := range sc.file.Leaders {
		seeds = append(seeds, l.Addr)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), kgo.RequestRetries(2)}, opts...)...)
	if err != nil {
		sc.t.Fatal(err)
	}
	sc.t.Cleanup(cl.Close)
	return cl
}

func (sc *secureCluster) admin() *kadm.Client {
	return kadm.NewClient(sc.as(security.LocalClusterUser, sc.clusterPw))
}

func (sc *secureCluster) client() *kgo.Client {
	return sc.as(sc.local.ClientUser, sc.local.ClientPassword)
}

func createACLs(t *testing.T, ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs %s %s: %v", r.Name, r.Operation, r.Err)
		}
	}
}

func produce(ctx context.Context, cl *kgo.Client, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

func joinCode(t *testing.T, ctx context.Context, cl *kgo.Client, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.ProtocolType, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = group, "consumer", 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
	req.Protocols = append(req.Protocols, p)
	// Straight to the group coordinator (node 0): FindCoordinator has a
	// check of its own.
	resp, err := req.RequestWith(ctx, cl.Broker(0))
	if err != nil {
		t.Fatalf("JoinGroup %s: %v", group, err)
	}
	return resp.ErrorCode
}

// TestKadmACLs: ACLs made with kadm protect topics and groups with
// Kafka's rules and codes against the generated client user (not a super
// user), a deny beats a prefixed allow, Describe is implied by Read, only
// the cluster principal administers ACLs, and the ACLs survive a restart.
func TestKadmACLs(t *testing.T) {
	sc := startSecure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm, cl := sc.admin(), sc.client()
	const client = "User:" + security.LocalClientUser

	// No ACLs: the credentials file's rules (everything for topics).
	if err := produce(ctx, cl, "secret"); err != nil {
		t.Fatalf("produce before any ACL: %v", err)
	}
	// The client is no super user: it cannot administer ACLs.
	if res, err := kadm.NewClient(cl).CreateACLs(ctx, kadm.NewACLs().Allow(client).Topics("x").Operations(kadm.OpRead)); err != nil ||
		len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateACLs by the client: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}

	// The client may do anything on topics starting "ord" and read group
	// "app-*" (prefixed); everyone is denied WRITE on "orders"; "secret"
	// and group "private" are someone else's.
	createACLs(t, ctx, adm, kadm.NewACLs().Allow(client).AllowHosts("*").Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll))
	createACLs(t, ctx, adm, kadm.NewACLs().Deny("User:*").DenyHosts("*").Topics("orders").Operations(kadm.OpWrite))
	createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:someone").AllowHosts("*").Topics("secret").Groups("private").Operations(kadm.OpRead))
	createACLs(t, ctx, adm, kadm.NewACLs().Allow(client).AllowHosts("*").Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		if d.Err != nil {
			t.Fatalf("DescribeACLs: %v", d.Err)
		}
		n += len(d.Described)
	}
	if n != 5 {
		t.Fatalf("DescribeACLs lists %d bindings, want 5: %+v", n, described)
	}
	// MATCH: the bindings that apply to topic "orders".
	match, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("orders").Allow().Deny().AllowHosts().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(match[0].Described); got != 2 {
		t.Fatalf("MATCH orders: %d bindings, want 2 (the prefixed allow, the literal deny): %+v", got, match[0].Described)
	}

	// The deny beats the prefixed allow: WRITE on orders fails, READ and
	// DESCRIBE (implied) work.
	if err := produce(ctx, cl, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to orders: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"orders", "secret"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, rt)
	}
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, mt := range mresp.Topics {
		codes[*mt.Topic] = mt.ErrorCode
	}
	if codes["orders"] != 0 {
		t.Fatalf("Metadata orders: %v, want it described (READ implies DESCRIBE)", kerr.ErrorForCode(codes["orders"]))
	}
	if codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Metadata secret: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(codes["secret"]))
	}
	if err := produce(ctx, cl, "secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// A topic without ACLs stays open (allow.everyone.if.no.acl.found).
	if err := produce(ctx, cl, "fresh"); err != nil {
		t.Fatalf("produce to a topic without ACLs: %v", err)
	}
	// The cluster principal is a super user.
	if err := produce(ctx, sc.as(security.LocalClusterUser, sc.clusterPw), "orders"); err != nil {
		t.Fatalf("produce as the cluster principal: %v", err)
	}

	// Fetch: READ on orders is allowed by the prefixed ALL.
	consumer := sc.client()
	consumer.AddConsumeTopics("orders")
	consumer.AddConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}})
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	fs := consumer.PollFetches(fctx)
	fcancel()
	if fs.NumRecords() == 0 {
		t.Fatalf("fetch of orders: no records (%v)", fs.Errors())
	}

	// Groups.
	if code := joinCode(t, ctx, cl, "private"); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("JoinGroup private: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := joinCode(t, ctx, cl, "app-1"); code != kerr.MemberIDRequired.Code {
		t.Fatalf("JoinGroup app-1: %v, want MEMBER_ID_REQUIRED (allowed)", kerr.ErrorForCode(code))
	}

	// FindCoordinator needs DESCRIBE on the group (v4+: per key).
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"private", "app-2"}
	fresp, err := fc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	fcodes := map[string]int16{}
	for _, c := range fresp.Coordinators {
		fcodes[c.Key] = c.ErrorCode
	}
	if fcodes["private"] != kerr.GroupAuthorizationFailed.Code || fcodes["app-2"] != 0 || len(fcodes) != 2 {
		t.Fatalf("FindCoordinator private, app-2: %v, want GROUP_AUTHORIZATION_FAILED and 0", fcodes)
	}
	// An offset commit of group app-1 needs READ on each topic.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation, oc.MemberID = "app-1", -1, ""
	for _, topic := range []string{"secret", "orders"} {
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = topic
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Partition, op.Offset = 0, 1
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
	}
	ocresp, err := oc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range ocresp.Topics {
		want := int16(0)
		if rt.Topic == "secret" {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if code := rt.Partitions[0].ErrorCode; code != want {
			t.Errorf("OffsetCommit app-1 %s: %v, want %v", rt.Topic, kerr.ErrorForCode(code), kerr.ErrorForCode(want))
		}
	}

	// A DeleteTopics sent to a leader is forwarded to the controller as
	// the client's: "secret" is not the client's to delete.
	dreq := kmsg.NewPtrDeleteTopicsRequest()
	dreq.TopicNames = []string{"secret"}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("secret")
	dreq.Topics = append(dreq.Topics, dt)
	dresp, err := dreq.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if code := dresp.Topics[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("DeleteTopics secret through a leader: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	// Delete the deny: WRITE on orders is allowed again.
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Deny("User:*").DenyHosts("*").Topics("orders").Operations(kadm.OpWrite))
	if err != nil || len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %v %+v", err, del)
	}
	if err := produce(ctx, cl, "orders"); err != nil {
		t.Fatalf("produce to orders after the deny is deleted: %v", err)
	}

	// Durable: a restart on the same data dir keeps the four left.
	sc.stop()
	sc.start()
	adm = sc.admin()
	described, err = adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	for _, d := range described {
		n += len(d.Described)
	}
	if n != 4 {
		t.Fatalf("after a restart DescribeACLs lists %d bindings, want 4", n)
	}
	if err := produce(ctx, sc.client(), "secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("after a restart, produce to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// loginErr is the error of a Metadata request by user with pass over
// SCRAM mech (nil: logged in).
func (sc *secureCluster) loginErr(user, pass string, sha256 bool) error {
	seeds := []string{sc.file.Coordinator.Addr, sc.file.Leaders[0].Addr}
	auth := scram.Auth{User: user, Pass: pass}
	mech := auth.AsSha512Mechanism()
	if sha256 {
		mech = auth.AsSha256Mechanism()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// TestKadmSCRAM: a user created with kadm's AlterUserSCRAMs logs in with
// kgo SCRAM at once, on the coordinator and on a leader; Kafka's bounds
// and codes; only a super user alters credentials; credentials survive a
// restart; a deleted credential no longer logs in.
func TestKadmSCRAM(t *testing.T) {
	sc := startSecure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := sc.admin()

	if err := sc.loginErr("bob", "bob-pw", false); err == nil {
		t.Fatal("bob logged in before he exists")
	}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-pw"},
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-pw"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for u, a := range altered {
		if a.Err != nil {
			t.Fatalf("AlterUserSCRAMs %s: %v", u, a.Err)
		}
	}
	if err := sc.loginErr("bob", "bob-pw", false); err != nil {
		t.Fatalf("bob's SCRAM-SHA-512 login: %v", err)
	}
	if err := sc.loginErr("bob", "wrong", false); err == nil {
		t.Fatal("bob logged in with a wrong password")
	}
	if err := sc.loginErr("bob", "bob-pw", true); err == nil {
		t.Fatal("bob logged in with SCRAM-SHA-256, which he has no credential for")
	}
	if err := sc.loginErr("carol", "carol-pw", true); err != nil {
		t.Fatalf("carol's SCRAM-SHA-256 login: %v", err)
	}

	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b := described["bob"]; b.Err != nil || len(b.CredInfos) != 1 || b.CredInfos[0].Mechanism != kadm.ScramSha512 || b.CredInfos[0].Iterations != 8192 {
		t.Fatalf("DescribeUserSCRAMs bob: %+v", b)
	}
	if len(described) != 2 {
		t.Fatalf("DescribeUserSCRAMs lists %d users, want bob and carol: %+v", len(described), described)
	}
	if d, err := adm.DescribeUserSCRAMs(ctx, "nobody"); err != nil || !errors.Is(d["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("DescribeUserSCRAMs nobody: %v %+v, want RESOURCE_NOT_FOUND", err, d)
	}

	// Kafka's checks, sent raw (kadm checks some before sending).
	areq := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []struct {
		name string
		mech int8
		iter int32
	}{{"few", 2, 1024}, {"many", 2, 20000}, {"mech", 3, 4096}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.name, u.mech, u.iter, []byte("salt"), []byte("salted")
		areq.Upsertions = append(areq.Upsertions, up)
	}
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = "nobody", 1
	areq.Deletions = append(areq.Deletions, d)
	aresp, err := areq.RequestWith(ctx, sc.as(security.LocalClusterUser, sc.clusterPw))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code,
		"mech": kerr.UnsupportedSaslMechanism.Code, "nobody": kerr.ResourceNotFound.Code}
	for _, r := range aresp.Results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("AlterUserSCRAMCredentials %s: %v, want %v", r.User, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(want[r.User]))
		}
		delete(want, r.User)
	}
	if len(want) != 0 {
		t.Errorf("no result for %v", want)
	}
	// The client user is no super user.
	if res, err := kadm.NewClient(sc.client()).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "eve", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "x"}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) &&
		!errors.Is(res["eve"].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("AlterUserSCRAMs by the client: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}

	// Durable, then deleted.
	sc.stop()
	sc.start()
	if err := sc.loginErr("bob", "bob-pw", false); err != nil {
		t.Fatalf("bob's login after a restart: %v", err)
	}
	del, err := sc.admin().AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || del["bob"].Err != nil {
		t.Fatalf("delete bob: %v %+v", err, del)
	}
	if err := sc.loginErr("bob", "bob-pw", false); err == nil {
		t.Fatal("bob logged in after his credential was deleted")
	}
}

// OffsetFetch with an authorizer hides the topics the principal may not
// DESCRIBE, as Kafka does: left out of a fetch of every partition, and
// TOPIC_AUTHORIZATION_FAILED (offset -1) for a partition the request
// names; the group's other offsets are answered as before.
func TestOffsetFetchHidesUndescribableTopics(t *testing.T) {
	sc := startSecure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, cl := sc.admin(), sc.client()
	const client = "User:" + security.LocalClientUser
	offsets := kadm.Offsets{}
	offsets.AddOffset("orders", 0, 5, -1)
	offsets.AddOffset("secret", 0, 7, -1)
	if res, err := adm.CommitOffsets(ctx, "audit", offsets); err != nil || res.Error() != nil {
		t.Fatalf("commit offsets as the cluster user: %v %v", err, res.Error())
	}
	createACLs(t, ctx, adm, kadm.NewACLs().Deny(client).DenyHosts("*").Topics("secret").Operations(kadm.OpDescribe))

	cadm := kadm.NewClient(cl)
	all, err := cadm.FetchOffsets(ctx, "audit")
	if err != nil || all.Error() != nil {
		t.Fatalf("fetch every offset as the client: %v %v", err, all.Error())
	}
	if o, ok := all.Lookup("orders", 0); !ok || o.At != 5 {
		t.Fatalf("orders/0 in the client's fetch of every offset: %+v (found %v), want 5", o, ok)
	}
	if _, ok := all["secret"]; ok {
		t.Fatalf("the client's fetch of every offset shows secret, which it may not describe: %+v", all["secret"])
	}

	for _, version := range []int16{7, 9} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(version)
		var topics []kmsg.OffsetFetchRequestTopic
		var groupTopics []kmsg.OffsetFetchRequestGroupTopic
		for _, name := range []string{"orders", "secret"} {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = name, []int32{0}
			topics = append(topics, rt)
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = name, []int32{0}
			groupTopics = append(groupTopics, gt)
		}
		if version < 8 {
			req.Group, req.Topics = "audit", topics
		} else {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group, g.Topics = "audit", groupTopics
			req.Groups = append(req.Groups, g)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][2]int64{} // offset, error code
		if version < 8 {
			for _, rt := range resp.Topics {
				for _, p := range rt.Partitions {
					got[rt.Topic] = [2]int64{p.Offset, int64(p.ErrorCode)}
				}
			}
		} else {
			for _, rt := range resp.Groups[0].Topics {
				for _, p := range rt.Partitions {
					got[rt.Topic] = [2]int64{p.Offset, int64(p.ErrorCode)}
				}
			}
		}
		if got["orders"] != [2]int64{5, 0} || got["secret"] != [2]int64{-1, int64(kerr.TopicAuthorizationFailed.Code)} {
			t.Fatalf("OffsetFetch v%d naming orders/0 and secret/0: %v, want orders at 5 and secret TOPIC_AUTHORIZATION_FAILED at -1", version, got)
		}
	}
}
