package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
)

// TestAlterCommands: `topics alter-config` sets and removes a topic's
// configs, `topics add-partitions` raises its partition count, and
// `groups reset-offsets` shows (dry run) and then commits a group's new
// offsets, each as Kafka's tools do, against `txncoord up` with a real
// consumer group's commits.
func TestAlterCommands(t *testing.T) {
	base := freePortRun(t, 4)
	up := startUp(t, "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.2", "--topics", "orders:2", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3))
	defer up.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adminArgs := []string{"--admin", up.adminURL}
	describe := func() admin.Topic {
		var topic admin.Topic
		cliJSON(t, &topic, append([]string{"topics", "describe", "--topic", "orders", "-o", "json"}, adminArgs...)...)
		return topic
	}

	// Configs: set two, then remove one; a bad value changes nothing.
	if _, stderr, code := runCLI(t, append([]string{"topics", "alter-config", "--topic", "orders", "--config", "retention.ms=3600000", "--config", "max.message.bytes=65536"}, adminArgs...)...); code != 0 {
		t.Fatalf("alter-config: exit %d: %s", code, stderr)
	}
	if cfg := describe().Configs; cfg["retention.ms"] != "3600000" || cfg["max.message.bytes"] != "65536" {
		t.Fatalf("configs after alter-config: %v", cfg)
	}
	if _, stderr, code := runCLI(t, append([]string{"topics", "alter-config", "--topic", "orders", "--delete-config", "max.message.bytes"}, adminArgs...)...); code != 0 {
		t.Fatalf("alter-config --delete-config: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, append([]string{"topics", "alter-config", "--topic", "orders", "--config", "retention.ms=soon"}, adminArgs...)...); code != 2 || !strings.Contains(stderr, "INVALID_CONFIG") {
		t.Fatalf("alter-config with a bad value: exit %d: %s", code, stderr)
	}
	// A config Kafka does not know is refused on both commands that take
	// configs, with Kafka's message.
	for _, args := range [][]string{
		{"topics", "alter-config", "--topic", "orders", "--config", "no.such.config=1"},
		{"topics", "create", "--topic", "unknown-config", "--partitions", "1", "--config", "no.such.config=1"},
	} {
		if _, stderr, code := runCLI(t, append(args, adminArgs...)...); code != 2 || !strings.Contains(stderr, "Unknown topic config name: no.such.config") {
			t.Fatalf("%s with an unknown config: exit %d: %s", args[1], code, stderr)
		}
	}
	if cfg := describe().Configs; cfg["retention.ms"] != "3600000" || cfg["max.message.bytes"] != "" || cfg["no.such.config"] != "" {
		t.Fatalf("configs after --delete-config and refused changes: %v", cfg)
	}

	// Partitions: 2 → 3; fewer is refused.
	if _, stderr, code := runCLI(t, append([]string{"topics", "add-partitions", "--topic", "orders", "--partitions", "3"}, adminArgs...)...); code != 0 {
		t.Fatalf("add-partitions: exit %d: %s", code, stderr)
	}
	if n := describe().Partitions; n != 3 {
		t.Fatalf("%d partitions after add-partitions 3", n)
	}
	if _, stderr, code := runCLI(t, append([]string{"topics", "add-partitions", "--topic", "orders", "--partitions", "2"}, adminArgs...)...); code != 2 || !strings.Contains(stderr, "INVALID_PARTITIONS") {
		t.Fatalf("add-partitions to fewer: exit %d: %s", code, stderr)
	}

	// A group that consumed everything: 5 records in each partition.
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := int32(0); p < 3; p++ {
		for i := range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.CommitAllOffsets(ctx, "resetters", ends.Offsets()); err != nil {
		t.Fatal(err)
	}
	committed := func() map[int32]int64 {
		fetched, err := adm.FetchOffsets(ctx, "resetters")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		fetched.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
		return out
	}
	reset := func(execute bool, args ...string) []resetOffset {
		args = append(append([]string{"groups", "reset-offsets", "--group", "resetters", "-o", "json"}, args...), adminArgs...)
		if execute {
			args = append(args, "--execute")
		}
		var plan []resetOffset
		cliJSON(t, &plan, args...)
		return plan
	}
	plan := reset(false, "--topic", "orders", "--to-earliest")
	if len(plan) != 3 || plan[0].NewOffset != 0 || plan[2].NewOffset != 0 {
		t.Fatalf("dry run --to-earliest: %+v", plan)
	}
	if got := committed(); got[0] != 5 || got[1] != 5 || got[2] != 5 {
		t.Fatalf("a dry run committed: %v", got)
	}
	reset(true, "--topic", "orders:1", "--to-offset", "3")
	reset(true, "--all-topics", "--to-offset", "99") // held at the latest offset
	if got := committed(); got[0] != 5 || got[1] != 5 || got[2] != 5 {
		t.Fatalf("after --to-offset 99: %v, want the latest offsets", got)
	}
	reset(true, "--topic", "orders:1", "--to-offset", "3")
	if got := committed(); got[0] != 5 || got[1] != 3 || got[2] != 5 {
		t.Fatalf("after --topic orders:1 --to-offset 3: %v", got)
	}
	reset(true, "--topic", "orders", "--to-earliest")
	if got := committed(); got[0] != 0 || got[1] != 0 || got[2] != 0 {
		t.Fatalf("after --to-earliest: %v", got)
	}
	reset(true, "--all-topics", "--to-datetime", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if got := committed(); got[0] != 5 || got[1] != 5 || got[2] != 5 {
		t.Fatalf("after --to-datetime in the future: %v, want the latest offsets", got)
	}

	// A group with a member is refused, as Kafka refuses it.
	member, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.ConsumerGroup("resetters"), kgo.ConsumeTopics("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, stderr, code := runCLI(t, append([]string{"groups", "reset-offsets", "--group", "resetters", "--all-topics", "--to-earliest", "--execute"}, adminArgs...)...)
		if code == 1 && strings.Contains(stderr, "can only be reset if the group 'resetters' is inactive") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reset of a group with a member: exit %d: %s", code, stderr)
		}
		member.PollFetches(ctx) // join
	}
}
