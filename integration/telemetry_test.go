package integration

import (
	"context"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientTelemetryNotAdvertised: no node advertises
// GetTelemetrySubscriptions (71) or PushTelemetry (72), as a Kafka broker
// without a client telemetry receiver plugin leaves them out of its
// ApiVersions (ApiVersionsResponse.filterApis), so clients that push
// metrics when a broker offers it (librdkafka's enable.metrics.push,
// on by default) never send them: a confluent-kafka-go producer and
// consumer with it on work, and the leaders (behind fault proxies) see
// no telemetry request.
func TestClientTelemetryNotAdvertised(t *testing.T) {
	const topic = "telemetry"
	c := StartCluster(t, Options{Topics: map[string]int32{topic: 3}, Proxied: []int32{1, 2, 3}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.Client()
	for _, id := range []int32{0, 1, 2, 3} {
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl.Broker(int(id)))
		if err != nil {
			t.Fatalf("ApiVersions of node %d: %v", id, err)
		}
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 71 || k.ApiKey == 72 {
				t.Errorf("node %d advertises %s v%d–v%d", id, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion)
			}
		}
	}

	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": c.Bootstrap()[0], "enable.metrics.push": true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	topicName := topic
	delivered := make(chan kafka.Event, 3)
	for part := int32(0); part < 3; part++ {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topicName, Partition: part}, Value: []byte("v")}, delivered); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case ev := <-delivered:
			if m := ev.(*kafka.Message); m.TopicPartition.Error != nil {
				t.Fatalf("produce: %v", m.TopicPartition.Error)
			}
		case <-ctx.Done():
			t.Fatal("records not delivered")
		}
	}
	co, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": c.Bootstrap()[0], "group.id": "telemetry-group",
		"auto.offset.reset": "earliest", "enable.metrics.push": true})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	if err := co.Subscribe(topic, nil); err != nil {
		t.Fatal(err)
	}
	read := 0
	for read < 3 && ctx.Err() == nil {
		if m, err := co.ReadMessage(100 * time.Millisecond); err == nil && m != nil {
			read++
		}
	}
	if read != 3 {
		t.Fatalf("consumer read %d records, want 3", read)
	}
	// kgo pushes metrics only to a cluster that advertises both keys
	// (Client.supportsClientMetrics); it produces as before.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("kgo")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 3} {
		for _, key := range []int16{71, 72} {
			if n := c.Proxy(id).Counts(key).Requests; n != 0 {
				t.Errorf("leader %d received %d %s requests", id, n, kmsg.NameForKey(key))
			}
		}
	}
}
