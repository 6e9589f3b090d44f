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

// EmbeddedSpec describes the cluster `txncoord up` runs: node i on
// port(Listen)+i, the coordinators first (nodes 0..C-1), then the leaders
// (nodes C..). With one coordinator that is the coordinator on Listen and
// leader i (1-based, node id i) on port(Listen)+i.
type EmbeddedSpec struct {
	// Coordinators is C (0 or 1: one coordinator, no etcd unless
	// EtcdEndpoints names one). Several share the transactional ids
	// through etcd: EtcdEndpoints, or an embedded etcd
	// (EmbeddedEtcdAddrs).
	Coordinators int
	// EtcdEndpoints name an external etcd (--etcd-endpoints).
	EtcdEndpoints []string
	// TransactionStatePartitions (0: the default, 50).
	TransactionStatePartitions int32
	ClusterID                  string
	Listen                     string
	CoordinatorVersion         string
	LeaderVersions             []string
	Topics                     map[string]int32
	DefaultPartitions          int32
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
	nc := max(1, s.Coordinators)
	nodes := nc + len(s.LeaderVersions)
	if s.embeddedEtcd() {
		nodes += 2 // the embedded etcd's client and peer ports
	}
	if err != nil || port <= 0 || port+nodes-1 > 65535 {
		return nil, fmt.Errorf("--listen %q: need a fixed port with room for %d ports after it", s.Listen, nodes-1)
	}
	if len(s.LeaderVersions) == 0 {
		return nil, errors.New("--leaders: at least one leader is needed")
	}
	at := func(i int) string { return net.JoinHostPort(host, strconv.Itoa(port+i)) }
	f := &cluster.File{
		ClusterID:                  s.ClusterID,
		DefaultPartitions:          s.DefaultPartitions,
		OffsetsPartitions:          s.OffsetsPartitions,
		TransactionStatePartitions: s.TransactionStatePartitions,
		Topics:                     s.Topics,
	}
	if nc == 1 {
		f.Coordinator = &cluster.Node{NodeID: 0, Addr: s.Listen, KafkaVersion: s.CoordinatorVersion}
	} else {
		for i := range nc {
			f.Coordinators = append(f.Coordinators, cluster.Node{NodeID: int32(i), Addr: at(i), KafkaVersion: s.CoordinatorVersion})
		}
	}
	if f.OffsetsPartitions == cluster.DefaultOffsetsPartitions {
		f.OffsetsPartitions = 0 // the default: cluster.yaml leaves it out
	}
	if f.TransactionStatePartitions == cluster.DefaultTransactionStatePartitions {
		f.TransactionStatePartitions = 0
	}
	if f.ClusterID == "" {
		f.ClusterID = cluster.DefaultClusterID
	}
	for i, v := range s.LeaderVersions {
		f.Leaders = append(f.Leaders, cluster.Node{
			NodeID:       int32(nc + i),
			Addr:         at(nc + i),
			KafkaVersion: v,
		})
	}
	switch {
	case len(s.EtcdEndpoints) > 0:
		f.Etcd = &cluster.Etcd{Endpoints: s.EtcdEndpoints}
	case s.embeddedEtcd():
		f.Etcd = &cluster.Etcd{Endpoints: []string{"http://" + at(nodes-2)}}
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// embeddedEtcd reports whether `txncoord up` runs its own etcd: several
// coordinators and no external etcd named.
func (s EmbeddedSpec) embeddedEtcd() bool { return s.Coordinators > 1 && len(s.EtcdEndpoints) == 0 }

// EmbeddedEtcdAddrs are the client and peer addresses of the embedded
// etcd, the two ports after the last leader's; ok is false when the spec
// runs none.
func (s EmbeddedSpec) EmbeddedEtcdAddrs() (client, peer string, ok bool) {
	if !s.embeddedEtcd() {
		return "", "", false
	}
	host, portStr, err := net.SplitHostPort(s.Listen)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil {
		return "", "", false
	}
	n := s.Coordinators + len(s.LeaderVersions)
	return net.JoinHostPort(host, strconv.Itoa(port+n)), net.JoinHostPort(host, strconv.Itoa(port+n+1)), true
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
