package topictest

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

// RetentionOf is the retention.ms the takeover tests give the topic they
// create i-th (named prefix-i): one config of its own per topic.
func RetentionOf(i int) string { return fmt.Sprint(60000 + i) }

// CheckCreated fails t unless adm lists every topic of created (by a
// Loop) with the id it was created with and Partitions, and describes for
// each the retention.ms of its own RetentionOf gives (created named
// prefix-i).
func CheckCreated(ctx context.Context, t testing.TB, adm *kadm.Client, prefix string, created map[string]kadm.CreateTopicResponse) {
	const partitions = Partitions
	t.Helper()
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
		if got.ID != resp.ID || len(got.Partitions) != partitions {
			t.Fatalf("topic %s: id %v, %d partitions; created with id %v, %d partitions", name, got.ID, len(got.Partitions), resp.ID, partitions)
		}
		names = append(names, name)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		var i int
		fmt.Sscanf(rc.Name, prefix+"-%d", &i)
		found := false
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				found = c.Value != nil && *c.Value == RetentionOf(i) && c.Source == kmsg.ConfigSourceDynamicTopicConfig
			}
		}
		if rc.Err != nil || !found {
			t.Fatalf("topic %s: configs %+v (%v), want retention.ms %s of its own", rc.Name, rc.Configs, rc.Err, RetentionOf(i))
		}
	}
}

// ProduceConsume produces n records to topic with a kgo client seeded
// with seeds, and reads every one back.
func ProduceConsume(ctx context.Context, t testing.TB, seeds []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]bool{}
	for i := range n {
		v := fmt.Sprintf("v%d", i)
		want[v] = true
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %d records not read: %v", topic, len(want), err)
		}
		fs.EachRecord(func(r *kgo.Record) { delete(want, string(r.Value)) })
	}
}

// Partitions is the partition count of the topics a Loop creates.
const Partitions = 2

// Loop creates topics prefix-0, prefix-1, ... (Partitions each, with the
// retention.ms RetentionOf gives) one after another with kadm, until Stop.
// After a failed request it takes a new client from newAdmin: a request to
// a dead or paused controller times out, and kgo keeps the controller it
// knows until its metadata ages, where the application's next client asks
// Metadata again.
type Loop struct {
	mu      sync.Mutex
	created map[string]kadm.CreateTopicResponse
	failed  int
	stop    chan struct{}
	once    sync.Once
	done    chan struct{}
}

// StartLoop starts creating.
func StartLoop(ctx context.Context, prefix string, newAdmin func() *kadm.Client) *Loop {
	l := &Loop{created: map[string]kadm.CreateTopicResponse{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		adm := newAdmin()
		for i := 0; adm != nil; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			name := fmt.Sprintf("%s-%d", prefix, i)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := adm.CreateTopic(rctx, Partitions, -1, map[string]*string{"retention.ms": kmsg.StringPtr(RetentionOf(i))}, name)
			cancel()
			l.mu.Lock()
			if err == nil && resp.Err == nil {
				l.created[name] = resp
			} else {
				l.failed++
			}
			l.mu.Unlock()
			if err != nil {
				adm = newAdmin()
			}
		}
	}()
	return l
}

// Created is how many topics the loop has created; Failed, how many
// requests failed.
func (l *Loop) Created() (created, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.created), l.failed
}

// WaitCreated waits until the loop has created n topics, or fails t after
// wait.
func (l *Loop) WaitCreated(t testing.TB, n int, wait time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got, _ := l.Created()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d topics created, want %d within %v", what, got, n, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop stops the loop (again: nothing more) and returns the topics it
// created.
func (l *Loop) Stop() map[string]kadm.CreateTopicResponse {
	l.once.Do(func() { close(l.stop) })
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.created
}
