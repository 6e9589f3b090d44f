package authmeta_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestKadmClientQuotas: quotas altered with kadm are stored (across a
// restart) and described with Kafka's filters; invalid entities, keys and
// values are INVALID_REQUEST and change nothing; a DENY of ALTER_CONFIGS on the cluster stops a
// client altering them.
func TestKadmClientQuotas(t *testing.T) {
	sc := startSecure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := sc.admin()
	user := func(name string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "user", Name: &name}
	}
	client := func(name string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "client-id", Name: &name}
	}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{user("alice")}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "request_percentage", Value: 12.5}}},
		{Entity: kadm.ClientQuotaEntity{user("alice"), client("app")}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2048}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 512}}},
		{Entity: kadm.ClientQuotaEntity{user("bad")}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
		{Entity: kadm.ClientQuotaEntity{user("bad")}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 3}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: kadm.StringPtr("10.0.0.1")}, user("x")}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: kadm.StringPtr("not-an-ip")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range altered {
		wantInvalid := i >= 3
		if wantInvalid != errors.Is(a.Err, kerr.InvalidRequest) || (!wantInvalid && a.Err != nil) {
			t.Errorf("entry %d (%v): %v (%s)", i, a.Entity, a.Err, a.ErrMessage)
		}
	}

	describe := func(strict bool, cs ...kadm.DescribeClientQuotaComponent) map[string]map[string]float64 {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, strict, cs)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]float64{}
		for _, q := range d {
			vs := map[string]float64{}
			for _, v := range q.Values {
				vs[v.Key] = v.Value
			}
			var parts []string
			for _, c := range q.Entity {
				parts = append(parts, c.String())
			}
			out[strings.Join(parts, ",")] = vs
		}
		return out
	}
	if all := describe(false); len(all) != 3 {
		t.Fatalf("every quota: %v, want 3 entities", all)
	}
	alice := describe(true, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: kadm.StringPtr("alice"), MatchType: 0})
	if len(alice) != 1 || alice["user=alice"]["producer_byte_rate"] != 1024 || alice["user=alice"]["request_percentage"] != 12.5 {
		t.Fatalf("strict user=alice: %v", alice)
	}
	if both := describe(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: kadm.StringPtr("alice"), MatchType: 0}); len(both) != 2 {
		t.Fatalf("user=alice, not strict: %v, want alice and alice+app", both)
	}
	if def := describe(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 1}); len(def) != 1 || def["user=<default>"]["producer_byte_rate"] != 512 {
		t.Fatalf("default user: %v", def)
	}
	if named := describe(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 2}); len(named) != 2 {
		t.Fatalf("any named user: %v, want 2", named)
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0}}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("EXACT without a name: %v, want INVALID_REQUEST", err)
	}

	// Removing the last key removes the entity; the client may not alter.
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{user("alice"), client("app")},
		Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	// ALTER_CONFIGS on the cluster has no ACL: everyone may (Kafka's
	// allow.everyone.if.no.acl.found); a DENY for the client stops it.
	createACLs(t, ctx, adm, kadm.NewACLs().Deny("User:client").DenyHosts("*").Clusters().Operations(kadm.OpAlterConfigs))
	if res, err := kadm.NewClient(sc.client()).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{user("eve")},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}}); err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter by the client: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}
	sc.stop()
	sc.start()
	adm = sc.admin()
	if all := describe(false); len(all) != 2 || all["user=alice"]["producer_byte_rate"] != 1024 {
		t.Fatalf("after a restart: %v, want alice and the default user", all)
	}
}
