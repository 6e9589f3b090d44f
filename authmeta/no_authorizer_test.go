package authmeta_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/internal/freeport"
)

// TestACLsWithoutAuthorizer: a cluster with no security section has no
// authorizer, and its ACL APIs answer as a Kafka broker without one:
// DescribeAcls SECURITY_DISABLED "No Authorizer is configured on the
// broker", each creation and deletion filter SECURITY_DISABLED "No
// Authorizer is configured." (kadm, sarama and the raw messages), the admin
// API 409; nothing is stored.
func TestACLsWithoutAuthorizer(t *testing.T) {
	port, err := freeport.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	sc := &secureCluster{t: t, dir: t.TempDir(), adminAddr: fmt.Sprintf("127.0.0.1:%d", port)}
	sc.start()
	t.Cleanup(sc.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(sc.file.Coordinator.Addr, sc.file.Leaders[0].Addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	for _, node := range []int32{0, 1} {
		dreq := kmsg.NewPtrDescribeACLsRequest()
		dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		dresp, err := dreq.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		if dresp.ErrorCode != kerr.SecurityDisabled.Code || dresp.ErrorMessage == nil || *dresp.ErrorMessage != "No Authorizer is configured on the broker" {
			t.Fatalf("node %d DescribeAcls: code %d message %v, want 54 and Kafka's message", node, dresp.ErrorCode, dresp.ErrorMessage)
		}
	}
	adm := kadm.NewClient(cl)
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range created {
		if !errors.Is(r.Err, kerr.SecurityDisabled) || r.ErrMessage != "No Authorizer is configured." {
			t.Fatalf("kadm CreateACLs: %v %q, want SECURITY_DISABLED and Kafka's message", r.Err, r.ErrMessage)
		}
	}
	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow().AllowHosts().Topics().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range deleted {
		if !errors.Is(r.Err, kerr.SecurityDisabled) {
			t.Fatalf("kadm DeleteACLs: %v, want SECURITY_DISABLED", r.Err)
		}
	}
	if n := len(sc.e.View.AuthMeta().ACLs()); n != 0 {
		t.Fatalf("%d ACLs stored, want none", n)
	}

	conf := sarama.NewConfig()
	conf.Version = sarama.V3_9_0_0
	sa, err := sarama.NewClusterAdmin([]string{sc.file.Coordinator.Addr}, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	_, err = sa.ListAcls(sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny})
	if !errors.Is(err, sarama.ErrSecurityDisabled) {
		t.Fatalf("sarama ListAcls: %v, want ErrSecurityDisabled", err)
	}
	err = sa.CreateACL(sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: "orders", ResourcePatternType: sarama.AclPatternLiteral},
		sarama.Acl{Principal: "User:alice", Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow})
	if !errors.Is(err, sarama.ErrSecurityDisabled) {
		t.Fatalf("sarama CreateACL: %v, want ErrSecurityDisabled", err)
	}

	_, err = admin.NewClient("http://"+sc.adminAddr).ACLs(ctx, admin.ACLFilter{})
	var apiErr *admin.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Fatalf("GET /v1/acls: %v, want 409", err)
	}
}
