package authmeta_test

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/txncoord/txncoord/security"
)

// TestSaramaClusterAdmin: sarama's ClusterAdmin (SASL PLAIN as the
// cluster user, a super user) creates, lists and deletes an ACL and
// upserts a SCRAM-SHA-256 user who then logs in with kgo.
func TestSaramaClusterAdmin(t *testing.T) {
	sc := startSecure(t)
	conf := sarama.NewConfig()
	conf.Version = sarama.V3_9_0_0
	conf.Net.SASL.Enable, conf.Net.SASL.Mechanism = true, sarama.SASLTypePlaintext
	conf.Net.SASL.User, conf.Net.SASL.Password = security.LocalClusterUser, sc.clusterPw
	sa, err := sarama.NewClusterAdmin([]string{sc.file.Coordinator.Addr}, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()

	res := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: "sar", ResourcePatternType: sarama.AclPatternPrefixed}
	acl := sarama.Acl{Principal: "User:client", Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}
	if err := sa.CreateACL(res, acl); err != nil {
		t.Fatalf("CreateACL: %v", err)
	}
	name := "sarama-topic"
	listed, err := sa.ListAcls(sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourceName: &name,
		ResourcePatternTypeFilter: sarama.AclPatternMatch, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ResourceName != "sar" || len(listed[0].Acls) != 1 || listed[0].Acls[0].Principal != "User:client" {
		t.Fatalf("ListAcls MATCH sarama-topic: %+v, want the prefixed sar binding", listed)
	}
	deleted, err := sa.DeleteACL(sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}, false)
	if err != nil || len(deleted) != 1 {
		t.Fatalf("DeleteACL every binding: %v %+v, want the one", err, deleted)
	}

	up, err := sa.UpsertUserScramCredentials([]sarama.AlterUserScramCredentialsUpsert{
		{Name: "dave", Mechanism: sarama.SCRAM_MECHANISM_SHA_256, Iterations: 4096, Salt: []byte("dave-salt"), Password: []byte("dave-pw")}})
	if err != nil || len(up) != 1 || up[0].ErrorCode != sarama.ErrNoError {
		t.Fatalf("UpsertUserScramCredentials: %v %+v", err, up)
	}
	if err := sc.loginErr("dave", "dave-pw", true); err != nil {
		t.Fatalf("dave's SCRAM-SHA-256 login: %v", err)
	}
	described, err := sa.DescribeUserScramCredentials([]string{"dave"})
	if err != nil || len(described) != 1 || len(described[0].CredentialInfos) != 1 || described[0].CredentialInfos[0].Iterations != 4096 {
		t.Fatalf("DescribeUserScramCredentials dave: %v %+v", err, described)
	}
}
