package leaderstub

// DescribeLogDirs (key 35), v0–v5.
//
// Behavior: a leader has one log dir, its data dir (the process log and
// bbolt file hold every partition of it). Each partition this leader has
// state for is listed with its size (the bytes of its stored batches),
// offset lag 0 and not future; null topics ask for every partition. v4
// adds the file system's total and usable bytes (-1 when statfs fails).
// Nodes without partitions answer with the same dir and no topics
// (cluster.RegisterNoLogDirs), so that a client asking every broker
// (kadm DescribeAllLogDirs) gets an answer from each.
//
// Version notes: v2 flexible; v3 top-level ErrorCode; v4 TotalBytes and
// UsableBytes; v5 (Kafka 4.3) IsCordoned, always false: a leader's one log
// dir is never cordoned.

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/groupby"
	"github.com/txncoord/txncoord/wire"
)

// describeLogDirsAPI is DescribeLogDirs v0–v5.
var describeLogDirsAPI = wire.API[*Leader]{Key: 35, Min: 0, Max: 5, Handle: (*Leader).handleDescribeLogDirs}

func (l *Leader) handleDescribeLogDirs(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	want := map[string]map[int32]bool{} // nil topics: every partition
	for _, rt := range req.Topics {
		if want[rt.Topic] == nil {
			want[rt.Topic] = map[int32]bool{}
		}
		for _, p := range rt.Partitions {
			want[rt.Topic][p] = true
		}
	}
	dir := LogDir(l.cfg.DataDir)
	var byTopic groupby.Ordered[string, kmsg.DescribeLogDirsResponseDirTopicPartition]
	for _, p := range l.sortedPartitions() {
		if req.Topics != nil && !want[p.topic][p.index] {
			continue
		}
		if _, ok := l.cfg.View.Topic(p.topic); !ok {
			continue // deleted
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition = p.index
		p.mu.RLock()
		dp.Size = p.size
		p.mu.RUnlock()
		byTopic.Add(p.topic, dp)
	}
	d := dir.Response()
	for topic, parts := range byTopic.All() {
		t := kmsg.NewDescribeLogDirsResponseDirTopic()
		t.Topic, t.Partitions = topic, parts
		d.Topics = append(d.Topics, t)
	}
	resp.Dirs = append(resp.Dirs, d)
	return wire.Now(resp)
}

// LogDir is a node's one log dir as DescribeLogDirs describes it.
type LogDir string

// Response is the dir with no topics: its absolute path and, for v4, the
// file system's total and usable bytes (-1 when unknown).
func (d LogDir) Response() kmsg.DescribeLogDirsResponseDir {
	out := kmsg.NewDescribeLogDirsResponseDir()
	path, err := filepath.Abs(string(d))
	if err != nil {
		path = string(d)
	}
	out.Dir, out.TotalBytes, out.UsableBytes = path, -1, -1
	var st syscall.Statfs_t
	if syscall.Statfs(path, &st) == nil {
		out.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
		out.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
	}
	return out
}
