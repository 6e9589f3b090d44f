package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestLibrdkafkaInitialRebalanceDelay: two confluent-kafka-go (librdkafka)
// consumers that subscribe to a new classic group 1 ms apart, with Kafka's
// group.initial.rebalance.delay.ms (3 s), end in the group's first
// generation together: each one's first assignment is half of the six
// partitions (a member that had a generation alone would first be given
// all six, then lose half in a second rebalance).
func TestLibrdkafkaInitialRebalanceDelay(t *testing.T) {
	const topic, group = "initial-delay", "initial-delay-group"
	c := StartCluster(t, Options{Topics: map[string]int32{topic: 6}, GroupInitialRebalanceDelayMs: new(int32(3000))})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var mu sync.Mutex
	first := map[string]int{} // member → partitions in its first assignment
	consumer := func(name string) *kafka.Consumer {
		co, err := kafka.NewConsumer(&kafka.ConfigMap{
			"bootstrap.servers": c.Bootstrap()[0], "client.id": name, "group.id": group,
			"auto.offset.reset": "earliest", "enable.auto.commit": false, "partition.assignment.strategy": "range",
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := co.SubscribeTopics([]string{topic}, func(co *kafka.Consumer, ev kafka.Event) error {
			switch e := ev.(type) {
			case kafka.AssignedPartitions:
				mu.Lock()
				if _, seen := first[name]; !seen {
					first[name] = len(e.Partitions)
				}
				mu.Unlock()
				return co.Assign(e.Partitions)
			case kafka.RevokedPartitions:
				return co.Unassign()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return co
	}
	a := consumer("a")
	defer a.Close()
	time.Sleep(time.Millisecond)
	b := consumer("b")
	defer b.Close()
	for ctx.Err() == nil {
		a.Poll(50)
		b.Poll(50)
		mu.Lock()
		n := len(first)
		mu.Unlock()
		if n == 2 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(first) != 2 {
		t.Fatalf("not both members were assigned: %v", first)
	}
	for name, n := range first {
		if n != 3 {
			t.Errorf("member %s's first assignment has %d partitions, want 3 of 6 (one generation with both members)", name, n)
		}
	}
}
