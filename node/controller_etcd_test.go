package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/internal/topictest"
)

// waitController waits until a coordinator of e runs the controller and
// returns its node id and lease epoch.
func waitController(t *testing.T, e *Embedded, not int32) (int32, int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, co := range e.Coordinators {
			if co.ctl == nil || co.Node.NodeID == not {
				continue
			}
			if co.ctl.Current() != nil {
				if id, epoch, ok := co.ctl.Holder(); ok && id == co.Node.NodeID {
					return id, epoch
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no coordinator (other than %d) runs the controller", not)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adminAt is a kadm client bootstrapped from one node only.
func adminAt(t *testing.T, addr string) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl), cl
}

// createAt sends CreateTopics for name to node id itself (not to the
// controller Metadata names): the node forwards it to the holder.
func createAt(ctx context.Context, cl *kgo.Client, id int32, name string, configs map[string]string) (int16, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, -1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return 0, err
	}
	return resp.Topics[0].ErrorCode, nil
}

// TestControllerTakeover: with three coordinators on etcd, the topic
// controller runs on the holder of its lease, which every node's
// Metadata names as ControllerID. A kadm client creates topics (each with
// a config) in a loop while the holder is paused (the up faults' Pause,
// as SIGSTOP: its lease lapses, and it still runs the controller it had,
// whose writes the next holder's fence refuses), then while the next
// holder is killed (the up faults' Kill: its node stops, its lease goes).
// Each time another coordinator takes the lease at a higher epoch and
// CreateTopics succeeds again; every topic created is there with its id
// and config; a CreateTopics sent to each
// live node itself is forwarded to the new holder; a kgo producer and
// consumer use a topic created after the takeover.
func TestControllerTakeover(t *testing.T) {
	e := startSeveralCoordinators(t)
	waitOwned(t, e, 12)
	holder, epoch := waitController(t, e, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Every node names the holder.
	nodes := append(append([]int32{}, 0, 1, 2), 3, 4)
	for _, id := range nodes {
		n, _ := e.View.Node(id)
		adm, _ := adminAt(t, n.Addr)
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if md.Controller != holder {
			t.Fatalf("node %d's Metadata names controller %d, the lease's holder is %d", id, md.Controller, holder)
		}
	}

	leader, _ := e.View.Node(3) // clients bootstrap from a leader, which is never killed
	loop := topictest.StartLoop(ctx, "ct", func() *kadm.Client { adm, _ := adminAt(t, leader.Addr); return adm })
	defer loop.Stop()
	// takeover injects fault into the holder while the loop creates, and
	// waits until another coordinator holds the controller at a higher
	// epoch and the loop has created five more topics.
	takeover := func(kind faults.Kind) (faults.Fault, int32, int32) {
		t.Helper()
		before, _ := loop.Created()
		f, err := e.Faults.Add(faults.Spec{Kind: kind, Node: holder})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		next, nextEpoch := waitController(t, e, holder)
		if nextEpoch <= epoch {
			t.Fatalf("controller moved from %d (epoch %d) to %d at epoch %d: the epoch did not rise", holder, epoch, next, nextEpoch)
		}
		moved := time.Since(at)
		loop.WaitCreated(t, before+5, 30*time.Second, fmt.Sprintf("after the %s", kind))
		_, failed := loop.Created()
		t.Logf("%s of holder %d: the lease moved to %d (epoch %d to %d) %v after; the loop created again %v after (%d failed attempts so far)",
			kind, holder, next, epoch, nextEpoch, moved.Round(time.Millisecond), time.Since(at).Round(time.Millisecond), failed)
		return f, next, nextEpoch
	}
	loop.WaitCreated(t, 5, 30*time.Second, "before the faults")
	// A paused holder (SIGSTOP): its lease lapses after the TTL, the next
	// holder fences it out; resumed, it follows.
	paused, next, nextEpoch := takeover(faults.Pause)
	if err := e.Faults.Remove(paused.ID); err != nil {
		t.Fatal(err)
	}
	holder, epoch = next, nextEpoch
	// A killed holder: it stops, its lease goes at once.
	killed := holder
	k, next, nextEpoch := takeover(faults.Kill)
	created := loop.Stop()

	// Every topic created is there, with its id and config, as the new
	// holder answers through a surviving coordinator.
	survivor, _ := e.View.Node(next)
	sadm, _ := adminAt(t, survivor.Addr)
	topictest.CheckCreated(ctx, t, sadm, "ct", created)

	// Each live node forwards a CreateTopics sent to it to the holder,
	// and names the new holder.
	for _, id := range nodes {
		if id == killed {
			continue
		}
		n, _ := e.View.Node(id)
		nadm, ncl := adminAt(t, n.Addr)
		md, err := nadm.BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if md.Controller != next {
			t.Fatalf("node %d names controller %d after the takeover, the holder is %d", id, md.Controller, next)
		}
		code, err := createAt(ctx, ncl, id, fmt.Sprintf("after-%d", id), map[string]string{"cleanup.policy": "delete"})
		if err != nil || code != 0 {
			t.Fatalf("CreateTopics sent to node %d: code %d, %v", id, code, err)
		}
	}

	// A topic created after the takeover carries records.
	topictest.ProduceConsume(ctx, t, []string{leader.Addr}, fmt.Sprintf("after-%d", leader.NodeID), 10)

	// The killed coordinator comes back as a follower of the new holder.
	if err := e.Faults.Remove(k.ID); err != nil {
		t.Fatal(err)
	}
	waitServes(t, e, killed)
	if id, _, ok := e.coordinatorByID(killed).ctl.Holder(); !ok || id != next {
		t.Fatalf("the revived coordinator %d sees holder %d (%v), want %d", killed, id, ok, next)
	}
}

// A single coordinator's data dir taken into the etcd mode: its topics
// and its security metadata are copied into etcd once, so the controller,
// on whichever coordinator holds its lease, serves the topics with their
// ids and configs (a deleted topic stays deleted), a client quota and the
// transaction.version UpdateFeatures finalized.
func TestSingleCoordinatorTopicsIntoEtcd(t *testing.T) {
	dir := t.TempDir()
	f, lns := twoLeaderFile(t)
	single, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: dir, Listeners: lns, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm, singleCl := adminAt(t, single.Bootstrap())
	kept, err := adm.CreateTopic(ctx, 3, -1, map[string]*string{"retention.ms": kmsg.StringPtr("123456")}, "kept")
	if err != nil || kept.Err != nil {
		t.Fatalf("create kept: %v %v", err, kept.Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "dropped"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopic(ctx, "dropped"); err != nil {
		t.Fatal(err)
	}
	user := "quota-user"
	quota := kadm.ClientQuotaEntity{{Type: "user", Name: &user}}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: quota, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}}})
	if err != nil || len(altered) != 1 || altered[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, altered)
	}
	up := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 1, 2 // safe downgrade
	up.FeatureUpdates = append(up.FeatureUpdates, u)
	if resp, err := up.RequestWith(ctx, singleCl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("UpdateFeatures: %v %+v", err, resp)
	}
	stopWithin(t, single.Stop)

	e := startSeveralCoordinatorsIn(t, dir)
	waitController(t, e, -1)
	adm, cl := adminAt(t, e.Bootstrap())
	quotas, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &user}})
	if err != nil || len(quotas) != 1 || len(quotas[0].Values) != 1 || quotas[0].Values[0] != (kadm.ClientQuotaValue{Key: "producer_byte_rate", Value: 1024}) {
		t.Fatalf("client quotas on etcd: %+v (%v), want %s's producer_byte_rate 1024", quotas, err, user)
	}
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	level := int16(-1)
	for _, ff := range versions.FinalizedFeatures {
		if ff.Name == "transaction.version" {
			level = ff.MaxVersionLevel
		}
	}
	if level != 1 {
		t.Fatalf("transaction.version finalized at %d on etcd, want the 1 UpdateFeatures set", level)
	}
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := listed["kept"]
	if !ok || got.ID != kept.ID || len(got.Partitions) != 3 {
		t.Fatalf("kept on etcd: %+v (listed %v), want id %v, 3 partitions", got, ok, kept.ID)
	}
	if _, ok := listed["dropped"]; ok {
		t.Fatal("a topic deleted before the move exists on etcd")
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("kept", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rc.Configs {
		found = found || c.Key == "retention.ms" && c.Value != nil && *c.Value == "123456"
	}
	if !found {
		t.Fatalf("kept's configs on etcd: %+v", rc.Configs)
	}
}
