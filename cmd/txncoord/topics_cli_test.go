package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
)

// `txncoord topics` against `txncoord up` started with auto-creation off
// from the environment (TXNCOORD_AUTO_CREATE_TOPICS_ENABLE=false): create
// with configs, the topic in Metadata, list, describe as kafka-topics.sh, --if-not-exists, --if-exists, the
// exit codes of refusals (one line each), delete; a produce to an unknown
// topic is not auto-created, and cluster.yaml says so.
func TestTopicsCommands(t *testing.T) {
	base := freePortRun(t, 4)
	dataDir := t.TempDir()
	up := startUpEnv(t, []string{"TXNCOORD_AUTO_CREATE_TOPICS_ENABLE=false"}, "--data-dir", dataDir,
		"--listen", fmt.Sprintf("127.0.0.1:%d", base), "--leaders", "4.2,4.1", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3))
	a := []string{"--admin", up.adminURL}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		stdout, stderr, code := runCLIEnv(t, nil, append(args, a...)...)
		if code != wantCode {
			t.Fatalf("txncoord %s: exit %d, want %d; stdout %q stderr %q", strings.Join(args, " "), code, wantCode, stdout, stderr)
		}
		if code != 0 {
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "txncoord: ") || stdout != "" {
				t.Fatalf("txncoord %s: error not one line: stdout %q stderr %q", strings.Join(args, " "), stdout, stderr)
			}
			return stderr
		}
		return stdout
	}

	if out := run(0, "topics", "create", "--topic", "orders", "--partitions", "4", "--replication-factor", "2",
		"--config", "max.message.bytes=2048", "--config", "cleanup.policy=delete"); out != "Created topic orders.\n" {
		t.Fatalf("create: %q", out)
	}
	if out := run(1, "topics", "create", "--topic", "orders"); !strings.Contains(out, "409") || !strings.Contains(out, "already exists") {
		t.Fatalf("create again: %q", out)
	}
	if out := run(0, "topics", "create", "--topic", "orders", "--if-not-exists"); out != "Topic orders already exists.\n" {
		t.Fatalf("create --if-not-exists: %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topic", "bad1", "--config", "max.message.bytes=lots"}, "max.message.bytes"},
		{[]string{"--topic", "bad2", "--config", "noequals"}, "noequals"},
		{[]string{"--topic", "bad3", "--partitions", "0"}, "--partitions"},
		{[]string{"--topic", "bad4", "--replication-factor", "4"}, "replication"},
		{[]string{"--topic", "bad/name"}, "bad/name"},
		{[]string{"--partitions", "2"}, "--topic is required"},
	} {
		if out := run(2, append([]string{"topics", "create"}, tc.args...)...); !strings.Contains(out, tc.want) {
			t.Errorf("create %v: %q does not name %q", tc.args, out, tc.want)
		}
	}

	// Kafka clients see what the CLI created.
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, "orders")
	if err != nil || md.Topics["orders"].Err != nil || len(md.Topics["orders"].Partitions) != 4 {
		t.Fatalf("Metadata of orders: %+v %v", md.Topics["orders"], err)
	}
	var listed []admin.Topic
	cliJSON(t, &listed, append([]string{"topics", "list", "-o", "json"}, a...)...)
	names := map[string]admin.Topic{}
	for _, x := range listed {
		names[x.Name] = x
	}
	if o := names["orders"]; o.Partitions != 4 || o.ReplicationFactor != 1 || o.RequestedReplicationFactor != 2 ||
		o.Configs["max.message.bytes"] != "2048" || !names["__consumer_offsets"].Internal {
		t.Fatalf("topics list -o json: %+v", listed)
	}
	if out := run(0, "topics", "list"); !regexp.MustCompile(`(?m)^orders\s+\S+\s+4\s+1\s+false$`).MatchString(out) {
		t.Fatalf("topics list:\n%s", out)
	}

	out := run(0, "topics", "describe", "--topic", "orders")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	head := fmt.Sprintf("Topic: orders\tTopicId: %s\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: cleanup.policy=delete,max.message.bytes=2048", names["orders"].ID)
	if len(lines) != 5 || lines[0] != head {
		t.Fatalf("describe:\n%s\nwant first line\n%s", out, head)
	}
	for p, line := range lines[1:] {
		mp := md.Topics["orders"].Partitions[int32(p)]
		if len(mp.Replicas) != 2 || mp.Replicas[0] != mp.Leader {
			t.Fatalf("orders/%d in Metadata: replicas %v, leader %d; want the replication factor of 2, the leader first", p, mp.Replicas, mp.Leader)
		}
		want := fmt.Sprintf("\tTopic: orders\tPartition: %d\tLeader: %d\tReplicas: %d,%d\tIsr: %d", p, mp.Leader, mp.Replicas[0], mp.Replicas[1], mp.Leader)
		if line != want {
			t.Errorf("describe partition %d: %q, want %q (Metadata's replicas, the leader alone in sync)", p, line, want)
		}
	}
	var all []admin.Topic
	cliJSON(t, &all, append([]string{"topics", "describe", "-o", "json"}, a...)...)
	if len(all) != len(listed) || len(all[0].PartitionInfo) == 0 {
		t.Fatalf("describe every topic: %d topics, want %d: %+v", len(all), len(listed), all)
	}

	// Auto-creation is off: a produce to an unknown topic fails and
	// creates nothing.
	pcl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.AllowAutoTopicCreation(), kgo.RecordDeliveryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "not-created", Value: []byte("v")}).FirstErr(); err == nil {
		t.Fatal("produce to an unknown topic with auto-creation off succeeded")
	}
	if out := run(2, "topics", "describe", "--topic", "not-created"); !strings.Contains(out, "404") {
		t.Fatalf("describe an unknown topic: %q", out)
	}
	yaml, err := os.ReadFile(filepath.Join(dataDir, "cluster.yaml"))
	if err != nil || !strings.Contains(string(yaml), "auto_create_topics_enable: false") {
		t.Fatalf("cluster.yaml: %v\n%s", err, yaml)
	}

	if out := run(0, "topics", "delete", "--topic", "orders"); out != "Deleted topic orders.\n" {
		t.Fatalf("delete: %q", out)
	}
	if out := run(2, "topics", "delete", "--topic", "orders"); !strings.Contains(out, "404") {
		t.Fatalf("delete again: %q", out)
	}
	if out := run(0, "topics", "delete", "--topic", "orders", "--if-exists"); out != "Topic orders does not exist: nothing deleted.\n" {
		t.Fatalf("delete --if-exists of a missing topic: %q", out)
	}
	if out := run(0, "topics", "delete", "--topic", "orders", "--if-exists", "-o", "json"); strings.Contains(out, "deleted") || !strings.Contains(out, `"not_found": "orders"`) {
		t.Fatalf("delete --if-exists -o json of a missing topic: %q", out)
	}
	// A new client: kgo answers Metadata from its cache for a while.
	fresh, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	md, err = kadm.NewClient(fresh).Metadata(ctx, "orders")
	if err != nil || md.Topics["orders"].Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("Metadata of a deleted topic: %+v %v", md.Topics["orders"], err)
	}
	up.stop(t)
}
