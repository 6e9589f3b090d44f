package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/security"
	"github.com/txncoord/txncoord/wire"
)

// With --secure and leaders in processes of their own, a CreateTopics a
// leader forwards reaches the controller in an Envelope with the client's
// principal (KIP-590), and the controller's ACLs decide: a client denied
// CREATE on the topic gets TOPIC_AUTHORIZATION_FAILED from a leader, as
// from the controller, and nothing is created; once the ACL is deleted the
// same request succeeds. An Envelope from a principal other than the
// cluster's is CLUSTER_AUTHORIZATION_FAILED and its request never runs.
func TestForwardCarriesClientPrincipal(t *testing.T) {
	local, clusterPw := localSecurity(t)
	f, lns := twoLeaderFile(t)
	f.Security = local.Settings
	co, _ := startSeparate(t, f, lns)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func(addr, user, pass string) *wire.Client {
		t.Helper()
		cl, err := wire.DialWith(ctx, addr, "envelope-test", wire.DialConfig{SASL: &wire.ClientSASL{Mechanism: wire.MechanismSCRAMSHA512, User: user, Pass: pass}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	admin := dial(f.Coordinator.Addr, security.LocalClusterUser, clusterPw)
	client := dial(f.Leaders[0].Addr, local.ClientUser, local.ClientPassword)
	do := func(cl *wire.Client, req kmsg.Request) kmsg.Response { t.Helper(); return mustDo(ctx, t, cl, req) }

	deny := kmsg.NewPtrCreateACLsRequest()
	deny.SetVersion(3)
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "locked-", kmsg.ACLResourcePatternTypePrefixed
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:"+local.ClientUser, "*", kmsg.ACLOperationCreate, kmsg.ACLPermissionTypeDeny
	deny.Creations = append(deny.Creations, c)
	// CREATE on the cluster would allow every topic: denied too.
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral
	deny.Creations = append(deny.Creations, c)
	for _, r := range do(admin, deny).(*kmsg.CreateACLsResponse).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("CreateAcls: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "locked-1", 1, -1
	create.Topics = append(create.Topics, ct)
	if rt := do(client, create).(*kmsg.CreateTopicsResponse).Topics[0]; rt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("CreateTopics at a leader by a client denied CREATE: error %d (%v), want TOPIC_AUTHORIZATION_FAILED", rt.ErrorCode, rt.ErrorMessage)
	}
	if _, ok := co.Controller.Configs("locked-1"); ok {
		t.Fatal("locked-1 was created although the client may not")
	}

	// The cluster principal's Envelope is the only one the controller
	// opens: the client's own is refused whole.
	req := &wire.Request{Body: create, Key: create.Key(), Version: create.GetVersion(), Principal: "User:" + security.LocalClusterUser}
	direct := dial(f.Coordinator.Addr, local.ClientUser, local.ClientPassword)
	if env := do(direct, wire.Envelop(req)).(*kmsg.EnvelopeResponse); env.ErrorCode != kerr.ClusterAuthorizationFailed.Code || env.ResponseData != nil {
		t.Fatalf("Envelope from the client: error %d, %d bytes of answer; want CLUSTER_AUTHORIZATION_FAILED and none", env.ErrorCode, len(env.ResponseData))
	}
	if _, ok := co.Controller.Configs("locked-1"); ok {
		t.Fatal("locked-1 was created by an Envelope the client sent")
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	del.SetVersion(3)
	flt := kmsg.NewDeleteACLsRequestFilter()
	flt.ResourceType, flt.ResourceName, flt.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("locked-"), kmsg.ACLResourcePatternTypePrefixed
	flt.Principal, flt.Host, flt.Operation, flt.PermissionType = kmsg.StringPtr("User:"+local.ClientUser), kmsg.StringPtr("*"), kmsg.ACLOperationCreate, kmsg.ACLPermissionTypeDeny
	del.Filters = append(del.Filters, flt)
	flt.ResourceType, flt.ResourceName, flt.ResourcePatternType = kmsg.ACLResourceTypeCluster, kmsg.StringPtr("kafka-cluster"), kmsg.ACLResourcePatternTypeLiteral
	del.Filters = append(del.Filters, flt)
	for _, r := range do(admin, del).(*kmsg.DeleteACLsResponse).Results {
		if r.ErrorCode != 0 || len(r.MatchingACLs) != 1 {
			t.Fatalf("DeleteAcls: %v, %d matched", kerr.ErrorForCode(r.ErrorCode), len(r.MatchingACLs))
		}
	}
	if rt := do(client, create).(*kmsg.CreateTopicsResponse).Topics[0]; rt.ErrorCode != 0 {
		t.Fatalf("CreateTopics at a leader once the deny is gone: error %d (%v)", rt.ErrorCode, rt.ErrorMessage)
	}
	if _, ok := co.Controller.Configs("locked-1"); !ok {
		t.Fatal("locked-1 not at the controller after a successful CreateTopics")
	}
}
