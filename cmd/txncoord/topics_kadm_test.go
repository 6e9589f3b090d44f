package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kadm against the `txncoord up` binary: ListOffsets by timestamp (after a
// time, and the record with the largest timestamp), DeleteRecords (the
// start offset moves), DescribeLogDirs at every node (the leaders list the
// topic's partitions; the coordinator node, which can lead partitions too,
// its one dir without them; nobody an error), and
// DescribeCluster (every node, the coordinator as controller).
func TestKadmLeaderAPIsAgainstUp(t *testing.T) {
	base := freePortRun(t, 4)
	up := startUp(t, "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.1", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.DefaultProduceTopic("kt"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 2, 1, nil, "kt"); err != nil || r.Err != nil {
		t.Fatalf("create kt: %v %v", err, r.Err)
	}
	// Partition 0: offsets 0, 1, 2 at an hour apart, the largest in the
	// middle (offset 1).
	now := time.Now()
	stamps := []time.Time{now.Add(-3 * time.Hour), now.Add(-1 * time.Hour), now.Add(-2 * time.Hour)}
	for _, ts := range stamps {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Timestamp: ts, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Timestamp: now, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	after, err := adm.ListOffsetsAfterMilli(ctx, now.Add(-150*time.Minute).UnixMilli(), "kt")
	if err != nil || after.Error() != nil {
		t.Fatalf("ListOffsetsAfterMilli: %v %v", err, after.Error())
	}
	if o, _ := after.Lookup("kt", 0); o.Offset != 1 || o.Timestamp != stamps[1].UnixMilli() {
		t.Fatalf("kt-0 after -150 min: offset %d at %d, want 1 at %d (the first record at or after it)", o.Offset, o.Timestamp, stamps[1].UnixMilli())
	}
	if o, _ := after.Lookup("kt", 1); o.Offset != 0 {
		t.Fatalf("kt-1 after -150 min: offset %d, want 0", o.Offset)
	}
	maxTS, err := adm.ListMaxTimestampOffsets(ctx, "kt")
	if err != nil || maxTS.Error() != nil {
		t.Fatalf("ListMaxTimestampOffsets: %v %v", err, maxTS.Error())
	}
	if o, _ := maxTS.Lookup("kt", 0); o.Offset != 1 {
		t.Fatalf("kt-0 max timestamp: offset %d, want 1", o.Offset)
	}

	var dels kadm.Offsets
	dels.Add(kadm.Offset{Topic: "kt", Partition: 0, At: 2})
	deleted, err := adm.DeleteRecords(ctx, dels)
	if err != nil || deleted.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, deleted.Error())
	}
	if r, _ := deleted.Lookup("kt", 0); r.LowWatermark != 2 {
		t.Fatalf("DeleteRecords kt-0 to 2: low watermark %d", r.LowWatermark)
	}
	starts, err := adm.ListStartOffsets(ctx, "kt")
	if err != nil || starts.Error() != nil {
		t.Fatalf("ListStartOffsets: %v %v", err, starts.Error())
	}
	if o, _ := starts.Lookup("kt", 0); o.Offset != 2 {
		t.Fatalf("kt-0 start offset after DeleteRecords: %d, want 2", o.Offset)
	}

	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatalf("DescribeAllLogDirs: %v", err)
	}
	if len(dirs) != 3 {
		t.Fatalf("DescribeAllLogDirs answered by %d nodes, want 3", len(dirs))
	}
	held := map[int32]bool{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Errorf("log dir %s of node %d: %v", d.Dir, d.Broker, d.Err)
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "kt" {
				held[p.Partition] = true
			}
		})
	})
	if !held[0] || !held[1] {
		t.Fatalf("DescribeAllLogDirs does not list both partitions of kt: %v", held)
	}
	if len(dirs[0]) != 1 {
		t.Fatalf("the coordinator node (0) lists %d log dirs, want its one: %+v", len(dirs[0]), dirs[0])
	}
	for _, d := range dirs[0] {
		if len(d.Topics) != 0 {
			t.Fatalf("the coordinator node (0) lists partitions in %s: %+v (kt is placed on the leaders)", d.Dir, d.Topics)
		}
	}

	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.ControllerID != 0 || len(resp.Brokers) != 3 || resp.ClusterID == "" {
		t.Fatalf("DescribeCluster: %v %+v", err, resp)
	}
	up.stop(t)
}
