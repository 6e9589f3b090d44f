package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	var (
		mu      sync.Mutex
		created = map[string]kadm.CreateTopicResponse{}
		failed  int
	)
	createdN := func() int { mu.Lock(); defer mu.Unlock(); return len(created) }
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		adm := newAdmin()
		for i := 0; adm != nil; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("ctl-%d", i)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := adm.CreateTopic(rctx, 2, -1, map[string]*string{"retention.ms": kmsg.StringPtr(fmt.Sprint(60000 + i))}, name)
			cancel()
			mu.Lock()
			if err == nil && resp.Err == nil {
				created[name] = resp
			} else {
				failed++
			}
			mu.Unlock()
			if err != nil {
				// A request to a dead controller times out, and kgo keeps
				// the controller it knows until its metadata ages: the
				// application's next client asks Metadata again.
				adm = newAdmin()
			}
		}
	}()
	for createdN() < 5 {
		time.Sleep(10 * time.Millisecond)
	}
	before := createdN()
	killedAt := sc.KillCoordinator(holder)
	delete(nodes, holder)
	next := waitNamed(holder)
	named := time.Since(killedAt)
	deadline := time.Now().Add(30 * time.Second)
	for createdN() < before+5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d topics created before the SIGKILL, %d 30 s after", before, createdN())
		}
		time.Sleep(10 * time.Millisecond)
	}
	againAt := time.Since(killedAt)
	close(stop)
	<-done
	t.Logf("SIGKILL of controller %d (lease TTL %v): every node named %d %v after, the CreateTopics loop succeeded again %v after; %d topics created, %d attempts failed",
		holder, sc.leaseTTL(), next, named.Round(time.Millisecond), againAt.Round(time.Millisecond), createdN(), failed)

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
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, resp := range created {
		got, ok := listed[name]
		if !ok {
			t.Fatalf("topic %s, created before, is gone", name)
		}
		if got.ID != resp.ID || len(got.Partitions) != 2 {
			t.Fatalf("topic %s: id %v, %d partitions; created with id %v, 2 partitions", name, got.ID, len(got.Partitions), resp.ID)
		}
		names = append(names, name)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		var i int
		fmt.Sscanf(rc.Name, "ctl-%d", &i)
		found := false
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				found = c.Value != nil && *c.Value == fmt.Sprint(60000+i) && c.Source == kmsg.ConfigSourceDynamicTopicConfig
			}
		}
		if rc.Err != nil || !found {
			t.Fatalf("topic %s: configs %+v (%v), want retention.ms %d of its own", rc.Name, rc.Configs, rc.Err, 60000+i)
		}
	}

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
	topic := fmt.Sprintf("after-%d", sc.file.Leaders[0].NodeID)
	pc, err := kgo.NewClient(kgo.SeedBrokers(sc.Bootstrap()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	want := map[string]bool{}
	for i := range 10 {
		v := fmt.Sprintf("v%d", i)
		want[v] = true
		if err := pc.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	for len(want) > 0 {
		fs := pc.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %d records not read: %v", topic, len(want), err)
		}
		fs.EachRecord(func(r *kgo.Record) { delete(want, string(r.Value)) })
	}

	// Restarted, the killed coordinator names the new holder too.
	sc.StartCoordinator(holder)
	nodes[holder] = sc.file.Coordinators[holder].Addr
	if got := waitNamed(-1); got != next {
		t.Fatalf("after the restart of %d the nodes name %d, the holder was %d", holder, got, next)
	}
}
