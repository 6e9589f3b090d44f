package groups_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/groups"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wire"
)

// TestOffsetsStoreBounded: __consumer_offsets is not a log here. Each
// committed offset is one bbolt key per group and partition, overwritten by
// the next commit, and a deleted group's keys are deleted, so what Kafka's
// log cleaner does for __consumer_offsets (keep the last offset of each
// key, drop a deleted group's) holds at every write. The process log in
// front of bbolt is truncated behind the applier. Thousands of commits of
// the same offsets and groups created and deleted leave the same keys in
// bbolt, a process log of a few segments and a bbolt file that stops
// growing, across a restart.
func TestOffsetsStoreBounded(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "groups.db")
	const segment = 64 << 10 // small, so truncation behind the applier shows
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // the address is the coordinator's in the view; requests go in-process
	f := &cluster.File{ClusterID: "offsets-bounded", DefaultPartitions: 1, OffsetsPartitions: 1,
		Coordinator: &cluster.Node{NodeID: 0, Addr: ln.Addr().String(), KafkaVersion: "4.2"},
		Leaders:     []cluster.Node{{NodeID: 1, Addr: "127.0.0.1:1", KafkaVersion: "4.2"}},
		Topics:      map[string]int32{"t": 4}, GroupInitialRebalanceDelayMs: new(int32(0))}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	view := cluster.NewView(f)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// open starts the group coordinator on the store in dir; close stops
	// both.
	open := func() (*storage.Store, *wire.LocalClient, func()) {
		st, err := storage.Open(dbPath, storage.Options{NoSync: true, SegmentSize: segment, ApplyInterval: 5 * time.Millisecond,
			Kinds: map[storage.Kind]storage.ApplyFunc{storage.KindGroup: groups.ApplyRecord}, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		c, err := groups.Open(groups.Config{NodeID: 0, View: view, Store: st, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		reg := wire.NewRegistry()
		c.Register(reg)
		profile, err := negotiation.Profile("4.2")
		if err != nil {
			t.Fatal(err)
		}
		srvLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := wire.Start(wire.Config{Listener: srvLn, Registry: reg, Profile: profile,
			Features: func() wire.Features { return view.Features("4.2") }, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		return st, srv.Local(""), func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			srv.Shutdown(sctx)
			c.Close()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(cl *wire.LocalClient, group string, offset int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1 // a commit outside any generation, as kadm's
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		for p := range int32(4) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, offset, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("commit %s: partition %d: error %d", group, p.Partition, p.ErrorCode)
			}
		}
	}
	deleteGroup := func(cl *wire.LocalClient, group string) {
		t.Helper()
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{group}
		resp, err := cl.Do(ctx, req)
		if err != nil || resp.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode != 0 {
			t.Fatalf("delete %s: %v %+v", group, err, resp)
		}
	}
	// run commits the offsets of two groups that stay, rounds times, and
	// creates and deletes a group every 10 rounds.
	round := 0
	run := func(cl *wire.LocalClient, rounds int) {
		for range rounds {
			round++
			commit(cl, "stays-a", int64(round))
			commit(cl, "stays-b", int64(round))
			if round%10 == 0 {
				gone := fmt.Sprintf("gone-%d", round)
				commit(cl, gone, int64(round))
				deleteGroup(cl, gone)
			}
		}
	}
	type sizes struct {
		keys      map[string]int // bbolt keys per bucket of the groups space
		walFiles  int
		walBytes  int64
		logBytes  uint64 // written to the process log since open
		fileBytes int64  // the bbolt file
	}
	measure := func(st *storage.Store) sizes {
		t.Helper()
		if err := st.Apply(); err != nil {
			t.Fatal(err)
		}
		var s sizes
		s.logBytes = st.Stats().Bytes
		entries, err := os.ReadDir(filepath.Join(dir, storage.WALDir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			s.walFiles++
			s.walBytes += info.Size()
		}
		return s
	}
	// countKeys reads the closed bbolt file.
	countKeys := func(s *sizes) {
		t.Helper()
		db, err := bbolt.Open(dbPath, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s.keys = map[string]int{}
		err = db.View(func(tx *bbolt.Tx) error {
			space := tx.Bucket([]byte(groups.SpaceName))
			if space == nil {
				return fmt.Errorf("no %s bucket", groups.SpaceName)
			}
			return space.ForEachBucket(func(name []byte) error {
				s.keys[string(name)] = space.Bucket(name).Stats().KeyN
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		s.fileBytes = info.Size()
	}

	const rounds = 1500
	st, cl, closeAll := open()
	run(cl, rounds)
	first := measure(st)
	closeAll()
	countKeys(&first)
	st, cl, closeAll = open()
	run(cl, rounds)
	second := measure(st)
	closeAll()
	countKeys(&second)
	t.Logf("after %d rounds: %+v; after %d: %+v", rounds, first, 2*rounds, second)

	// 2 groups × 4 partitions of offsets, whatever the number of commits
	// and of groups deleted.
	if first.keys["offsets"] != 8 || second.keys["offsets"] != 8 || first.keys["groups"] != second.keys["groups"] || second.keys["groups"] > 2 {
		t.Errorf("bbolt keys: %v after %d rounds, %v after %d: want 8 offsets and the 2 groups that stay", first.keys, rounds, second.keys, 2*rounds)
	}
	for name, n := range second.keys {
		if n != first.keys[name] {
			t.Errorf("bucket %s: %d keys after %d rounds, %d after %d", name, first.keys[name], rounds, n, 2*rounds)
		}
	}
	// Each run wrote many segments' worth of log; what is left is the
	// tail the applier has not truncated yet.
	for _, s := range []sizes{first, second} {
		if s.logBytes < 20*segment {
			t.Fatalf("only %d bytes written to the process log: the test shows nothing about truncation", s.logBytes)
		}
		if s.walFiles > 3 || s.walBytes > 3*segment {
			t.Errorf("process log: %d files, %d bytes after %d bytes written: not truncated behind the applier", s.walFiles, s.walBytes, s.logBytes)
		}
	}
	if second.fileBytes > first.fileBytes*2 {
		t.Errorf("bbolt file grew from %d to %d bytes over the same commits", first.fileBytes, second.fileBytes)
	}
}
