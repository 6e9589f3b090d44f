package authmeta_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/security"
)

// TestUpdateFeaturesTransactionVersion: transaction.version, finalized at 2
// by a cluster of 4.2 nodes, is downgraded to 0 with UpdateFeatures (only
// with a downgrade type; never above what the nodes support; only by a
// super user); every node's ApiVersions then finalizes 0 with a higher
// epoch, a kgo transactional producer commits with it, the level survives
// a restart, and an upgrade brings 2 back.
func TestUpdateFeaturesTransactionVersion(t *testing.T) {
	sc := startSecure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := sc.as(security.LocalClusterUser, sc.clusterPw)

	finalized := func(cl *kgo.Client, node int32) (int16, int64) {
		t.Helper()
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" {
				return f.MaxVersionLevel, resp.FinalizedFeaturesEpoch
			}
		}
		t.Fatalf("node %d finalizes no transaction.version", node)
		return 0, 0
	}
	update := func(cl *kgo.Client, level int16, upgradeType int8) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", level, upgradeType
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return resp.ErrorCode, msg
	}

	if level, epoch := finalized(admin, 1); level != 2 || epoch != 1 {
		t.Fatalf("initially: transaction.version %d epoch %d, want 2 and 1", level, epoch)
	}
	if code, msg := update(admin, 3, 1); code != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("upgrade to 3: %v %s, want INVALID_UPDATE_VERSION", kerr.ErrorForCode(code), msg)
	}
	if code, msg := update(admin, 0, 1); code != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("downgrade with UPGRADE: %v %s, want INVALID_UPDATE_VERSION", kerr.ErrorForCode(code), msg)
	}
	if code, _ := update(sc.client(), 0, 2); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("downgrade by the client: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code, msg := update(admin, 0, 2); code != 0 {
		t.Fatalf("safe downgrade to 0: %v %s", kerr.ErrorForCode(code), msg)
	}
	for _, node := range []int32{0, 1, 2} {
		if level, epoch := finalized(admin, node); level != 0 || epoch <= 1 {
			t.Fatalf("node %d after the downgrade: transaction.version %d epoch %d, want 0 and above 1", node, level, epoch)
		}
	}

	// A transactional producer works at the finalized version.
	p := sc.as(sc.local.ClientUser, sc.local.ClientPassword, kgo.TransactionalID("tv0"))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "fresh", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce at transaction.version 0: %v", err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit at transaction.version 0: %v", err)
	}

	sc.stop()
	sc.start()
	admin = sc.as(security.LocalClusterUser, sc.clusterPw)
	if level, _ := finalized(admin, 1); level != 0 {
		t.Fatalf("after a restart: transaction.version %d, want 0", level)
	}
	if code, msg := update(admin, 2, 1); code != 0 {
		t.Fatalf("upgrade back to 2: %v %s", kerr.ErrorForCode(code), msg)
	}
	if level, _ := finalized(admin, 2); level != 2 {
		t.Fatalf("after the upgrade: transaction.version %d, want 2", level)
	}
}
