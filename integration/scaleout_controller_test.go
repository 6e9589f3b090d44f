package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/topictest"
)

// controllerAt is the ControllerID node id's Metadata names (-1 on error).
func controllerAt(ctx context.Context, addr string) int32 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return -1
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return -1
	}
	return resp.ControllerID
}

// TestScaleoutControllerSIGKILL: in a cluster of separate processes
// (three coordinators, three leaders, a three-member etcd), the topic
// controller runs on the coordinator holding its lease, which every node
// names as ControllerID. A kadm client (bootstrapped from the leaders)
// creates topics, each with a config, in a loop while the holder is
// SIGKILLed: another coordinator takes the lease when it lapses, and
// CreateTopics succeeds again; every topic created before is there with
// its id and config; a CreateTopics sent to each live node itself is
// forwarded to the new holder; kgo produces to and consumes from a topic
// created after the takeover.
func TestScaleoutControllerSIGKILL(t *testing.T) {
	sc := startScaleCluster(t, scaleConfig{LeaseTTL: 2 * time.Second})
	ctx := testCtx(t, 3*time.Minute)
	nodes := map[int32]string{}
	for _, n := range sc.file.Coordinators {
		nodes[n.NodeID] = n.Addr
	}
	for _, n := range sc.file.Leaders {
		nodes[n.NodeID] = n.Addr
	}
	// waitNamed waits until every node but skip names one coordinator
	// other than skip as the controller, and returns it.
	waitNamed := func(skip int32) int32 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			named, agree := int32(-1), true
			for id, addr := range nodes {
				if id == skip {
					continue
				}
				c := controllerAt(ctx, addr)
				if c < 0 || c >= scaleCoordinators || c == skip || named >= 0 && c != named {
					agree = false
					break
				}
				named = c
			}
			if agree {
				return named
			}
			if time.Now().After(deadline) {
				t.Fatalf("the nodes do not name one controller other than %d", skip)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	holder := waitNamed(-1)

	newAdmin := func() *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...))
		if err != nil {
			t.Error(err)
			return nil
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	loop := topictest.StartLoop(ctx, "ctl", newAdmin)
	defer loop.Stop()
	loop.WaitCreated(t, 5, 30*time.Second, "before the SIGKILL")
	before, _ := loop.Created()
	killedAt := sc.KillCoordinator(holder)
	delete(nodes, holder)
	next := waitNamed(holder)
	named := time.Since(killedAt)
	loop.WaitCreated(t, before+5, 30*time.Second, "after the SIGKILL")
	againAt := time.Since(killedAt)
	created := loop.Stop()
	_, failed := loop.Created()
	t.Logf("SIGKILL of controller %d (lease TTL %v): every node named %d %v after, the CreateTopics loop succeeded again %v after; %d topics created, %d attempts failed",
		holder, sc.leaseTTL(), next, named.Round(time.Millisecond), againAt.Round(time.Millisecond), len(created), failed)

	cl, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Every node learns the holder's topics within a poll of its
	// follower (250 ms): ask each until it lists every topic created.
	for id, addr := range nodes {
		ncl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		missing := ""
		for deadline := time.Now().Add(10 * time.Second); ; {
			req := kmsg.NewPtrMetadataRequest()
			resp, err := req.RequestWith(ctx, ncl.Broker(int(id)))
			missing = fmt.Sprint(err)
			if err == nil {
				has := map[string]bool{}
				for _, rt := range resp.Topics {
					if rt.ErrorCode == 0 && rt.Topic != nil {
						has[*rt.Topic] = true
					}
				}
				missing = ""
				for name := range created {
					if !has[name] {
						missing += " " + name
					}
				}
			}
			if missing == "" || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		ncl.Close()
		if missing != "" {
			t.Fatalf("node %d does not list topics created before, 10 s after the loop: %s", id, missing)
		}
	}
	topictest.CheckCreated(ctx, t, adm, "ctl", created)

	// Each live node forwards a CreateTopics sent to it to the holder.
	for id, addr := range nodes {
		ncl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("after-%d", id), 2, -1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, ncl.Broker(int(id)))
		ncl.Close()
		if err != nil || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("CreateTopics sent to node %d: %v %+v", id, err, resp)
		}
	}

	// A topic created after the takeover carries records, through the
	// leaders (which learned it from the new holder).
	topictest.ProduceConsume(ctx, t, sc.Bootstrap(), fmt.Sprintf("after-%d", sc.file.Leaders[0].NodeID), 10)

	// Restarted, the killed coordinator names the new holder too.
	sc.StartCoordinator(holder)
	nodes[holder] = sc.file.Coordinators[holder].Addr
	if got := waitNamed(-1); got != next {
		t.Fatalf("after the restart of %d the nodes name %d, the holder was %d", holder, got, next)
	}
}
