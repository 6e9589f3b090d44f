package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/txncoord/txncoord/cluster"
)

// EmbeddedSpec describes the cluster `txncoord up` runs: the coordinator on
// Listen and leader i (1-based, node id i) on port(Listen)+i.
type EmbeddedSpec struct {
	ClusterID          string
	Listen             string
	CoordinatorVersion string
	LeaderVersions     []string
	Topics             map[string]int32
	DefaultPartitions  int32
	// OffsetsPartitions is the partition count of __consumer_offsets
	// (0: cluster.DefaultOffsetsPartitions).
	OffsetsPartitions int32
}

// ClusterFile turns the spec into a validated cluster file.
func (s EmbeddedSpec) ClusterFile() (*cluster.File, error) {
	host, portStr, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w", s.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port+len(s.LeaderVersions) > 65535 {
		return nil, fmt.Errorf("--listen %q: need a fixed port with room for %d leader ports after it", s.Listen, len(s.LeaderVersions))
	}
	if len(s.LeaderVersions) == 0 {
		return nil, errors.New("--leaders: at least one leader is needed")
	}
	f := &cluster.File{
		ClusterID:         s.ClusterID,
		Coordinator:       &cluster.Node{NodeID: 0, Addr: s.Listen, KafkaVersion: s.CoordinatorVersion},
		DefaultPartitions: s.DefaultPartitions,
		OffsetsPartitions: s.OffsetsPartitions,
		Topics:            s.Topics,
	}
	if f.OffsetsPartitions == cluster.DefaultOffsetsPartitions {
		f.OffsetsPartitions = 0 // the default: cluster.yaml leaves it out
	}
	if f.ClusterID == "" {
		f.ClusterID = cluster.DefaultClusterID
	}
	for i, v := range s.LeaderVersions {
		f.Leaders = append(f.Leaders, cluster.Node{
			NodeID:       int32(i + 1),
			Addr:         net.JoinHostPort(host, strconv.Itoa(port+i+1)),
			KafkaVersion: v,
		})
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// WriteClusterFile stores the file as DATA_DIR/cluster.yaml, creating the
// data dir.
func WriteClusterFile(dataDir string, f *cluster.File) (string, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, "cluster.yaml")
	return path, f.Write(path)
}
