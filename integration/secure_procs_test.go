package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/freeport"
	"github.com/txncoord/txncoord/security"
)

// TestSecureProcsLeadersFollowController: a coordinator and two leaders
// as processes of their own with security (SASL SCRAM over plaintext and
// the generated users). An ACL created through the controller is enforced
// by the leader processes (a DENY WRITE on a topic refuses the client's
// produce there with TOPIC_AUTHORIZATION_FAILED; deleting it lets the
// produce through again), ACL requests sent to a leader process reach the
// controller (kadm picks any node) but only from a principal the leader
// finds allowed (the client's CreateAcls there is refused), and a transaction.version downgrade finalized
// by the controller is what each leader process finalizes in ApiVersions,
// with the controller's epoch. A SCRAM user created through the controller
// logs in at the leader processes.
func TestSecureProcsLeadersFollowController(t *testing.T) {
	dir := keptDir(t)
	local, err := security.GenerateLocal(filepath.Join(dir, "security"))
	if err != nil {
		t.Fatal(err)
	}
	local.Settings.TLS = nil
	clusterPw, err := os.ReadFile(local.ClusterPasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	base, err := freeport.Run(3)
	if err != nil {
		t.Fatal(err)
	}
	f := &cluster.File{ClusterID: cluster.DefaultClusterID, DefaultPartitions: 1,
		Coordinator: &cluster.Node{NodeID: 0, Addr: fmt.Sprintf("127.0.0.1:%d", base), KafkaVersion: "4.2"},
		Topics:      map[string]int32{"guarded": 2}, Security: local.Settings, GroupInitialRebalanceDelayMs: new(int32(0))}
	for i := int32(1); i <= 2; i++ {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: i, Addr: fmt.Sprintf("127.0.0.1:%d", base+int(i)), KafkaVersion: "4.2"})
	}
	pc := &procCluster{t: t, bin: txncoordBinary(t), dir: dir, Leaders: map[int32]*proc{}, file: f, coordAt: f.Coordinator.Addr}
	pc.leaderCF = pc.writeFile("cluster.yaml", f)
	pc.coordCF = pc.leaderCF
	for _, l := range f.Leaders {
		pc.StartLeader(l.NodeID)
	}
	pc.StartCoordinator()

	seeds := []string{f.Coordinator.Addr, f.Leaders[0].Addr, f.Leaders[1].Addr}
	as := func(user, pass string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()),
			kgo.RequestRetries(1), kgo.RecordRetries(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	superCl := as(security.LocalClusterUser, strings.TrimSpace(string(clusterPw)))
	adm := kadm.NewClient(superCl)
	client := as(local.ClientUser, local.ClientPassword)
	produce := func() error {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		return client.ProduceSync(pctx, &kgo.Record{Topic: "guarded", Value: []byte("v")}).FirstErr()
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not within the test's time", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	eventually("the client's first produce", func() bool { return produce() == nil })

	// The client user may not grant itself anything by asking a leader
	// process (whose forward travels as the cluster principal): the leader
	// refuses it as the controller would.
	grant := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "guarded", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:"+local.ClientUser, "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	grant.Creations = append(grant.Creations, c)
	for _, l := range f.Leaders {
		gresp, err := grant.RequestWith(ctx, client.Broker(int(l.NodeID)))
		if err != nil || len(gresp.Results) != 1 || gresp.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("the client's CreateAcls at leader %d: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", l.NodeID, err, gresp)
		}
	}

	// A SCRAM user created through the controller logs in at each leader
	// process, which relays the exchange to the controller (it has no
	// copy of the user database); a wrong password is refused there.
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "relayed", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "relayed-pw"},
	}); err != nil || altered.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, altered.Error())
	}
	for _, l := range f.Leaders {
		for _, tc := range []struct {
			pass string
			ok   bool
		}{{"relayed-pw", true}, {"not-the-password", false}} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(l.Addr), kgo.SASL(scram.Auth{User: "relayed", Pass: tc.pass}.AsSha512Mechanism()),
				kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			cl.Close()
			if got := err == nil; got != tc.ok || !tc.ok && !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("user relayed with password %q at leader %d: %v, want ok=%v", tc.pass, l.NodeID, err, tc.ok)
			}
		}
	}

	deny := kadm.NewACLs().Deny("User:" + local.ClientUser).DenyHosts().Topics("guarded").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, deny)
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, res)
	}
	eventually("TOPIC_AUTHORIZATION_FAILED at the leader processes", func() bool {
		return errors.Is(produce(), kerr.TopicAuthorizationFailed)
	})
	if _, err := adm.DeleteACLs(ctx, deny); err != nil {
		t.Fatal(err)
	}
	eventually("the produce after the DENY is deleted", func() bool { return produce() == nil })

	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 0, 2 // SAFE_DOWNGRADE
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	resp, err := req.RequestWith(ctx, superCl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Results) > 0 && resp.Results[0].ErrorCode != 0 { // v2 lists no results
		t.Fatalf("UpdateFeatures transaction.version=0: %v %+v", err, resp)
	}
	finalized := func(node int32) (int16, int64) {
		vresp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, superCl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		for _, ff := range vresp.FinalizedFeatures {
			if ff.Name == "transaction.version" {
				return ff.MaxVersionLevel, vresp.FinalizedFeaturesEpoch
			}
		}
		return -1, vresp.FinalizedFeaturesEpoch
	}
	level0, epoch0 := finalized(0)
	if level0 != 0 || epoch0 < 2 {
		t.Fatalf("the controller finalizes transaction.version %d epoch %d, want 0 and a raised epoch", level0, epoch0)
	}
	for _, l := range f.Leaders {
		eventually(fmt.Sprintf("leader %d finalizing the controller's transaction.version", l.NodeID), func() bool {
			level, epoch := finalized(l.NodeID)
			return level == 0 && epoch == epoch0
		})
	}
}
