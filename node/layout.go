package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/txncoord/txncoord/cluster"
)

// The data dir knows its layout, as Kafka's meta.properties does: the
// cluster id, the nodes it holds with their roles, and how many
// coordinators and leaders the cluster has. Node ids, the placement of
// partitions ((fnv32a(topic) + p) mod leaders) and of transactional ids
// follow from them, so a start with another layout would find none of the
// data: topics read empty, committed offsets and transactions are gone.
// Such a start is refused before anything is written.

// LayoutFile is the layout's file in a data dir.
const LayoutFile = "meta.properties"

// Layout is a data dir's cluster layout.
type Layout struct {
	ClusterID    string
	Nodes        []LayoutNode // the nodes whose data the dir holds
	Coordinators int
	Leaders      int
}

// LayoutNode is one node of a data dir and its role.
type LayoutNode struct {
	ID   int32
	Role string // "coordinator" or "leader"
}

// ErrLayoutChanged is a start whose layout differs from the data dir's.
var ErrLayoutChanged = errors.New("cluster layout changed")

// EmbeddedLayout is the layout of `txncoord up` with file: every node.
func EmbeddedLayout(f *cluster.File) Layout {
	l := Layout{ClusterID: f.ClusterID, Coordinators: len(f.CoordinatorNodes()), Leaders: len(f.Leaders)}
	for _, n := range f.CoordinatorNodes() {
		l.Nodes = append(l.Nodes, LayoutNode{n.NodeID, "coordinator"})
	}
	for _, n := range f.Leaders {
		l.Nodes = append(l.Nodes, LayoutNode{n.NodeID, "leader"})
	}
	return l
}

// NodeLayout is the layout of one node's own process (`txncoord
// coordinator` or `leader`) in the cluster of file.
func NodeLayout(f *cluster.File, id int32, role string) Layout {
	return Layout{ClusterID: f.ClusterID, Coordinators: len(f.CoordinatorNodes()), Leaders: len(f.Leaders),
		Nodes: []LayoutNode{{id, role}}}
}

func (l Layout) nodesString() string {
	parts := make([]string, len(l.Nodes))
	for i, n := range l.Nodes {
		parts[i] = fmt.Sprintf("%d:%s", n.ID, n.Role)
	}
	return strings.Join(parts, ",")
}

func (l Layout) String() string {
	return fmt.Sprintf("cluster %s, nodes %s (%d coordinator(s), %d leader(s))", l.ClusterID, l.nodesString(), l.Coordinators, l.Leaders)
}

func (l Layout) equal(o Layout) bool {
	return l.ClusterID == o.ClusterID && l.nodesString() == o.nodesString() && l.Coordinators == o.Coordinators && l.Leaders == o.Leaders
}

func (l Layout) encode() []byte {
	var b bytes.Buffer
	b.WriteString("# txncoord: the cluster layout of this data dir; a start with another layout is refused\n")
	fmt.Fprintf(&b, "version=1\ncluster.id=%s\nnodes=%s\ncoordinators=%d\nleaders=%d\n", l.ClusterID, l.nodesString(), l.Coordinators, l.Leaders)
	return b.Bytes()
}

func parseLayout(raw []byte) (Layout, error) {
	var l Layout
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return l, fmt.Errorf("line %q: want key=value", line)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if kv["version"] != "1" {
		return l, fmt.Errorf("version %q: this release reads version 1", kv["version"])
	}
	l.ClusterID = kv["cluster.id"]
	var err error
	if l.Coordinators, err = strconv.Atoi(kv["coordinators"]); err != nil {
		return l, fmt.Errorf("coordinators %q: %w", kv["coordinators"], err)
	}
	if l.Leaders, err = strconv.Atoi(kv["leaders"]); err != nil {
		return l, fmt.Errorf("leaders %q: %w", kv["leaders"], err)
	}
	for _, item := range strings.Split(kv["nodes"], ",") {
		id, role, ok := strings.Cut(item, ":")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || (role != "coordinator" && role != "leader") {
			return l, fmt.Errorf("nodes %q: want id:role,... with role coordinator or leader", kv["nodes"])
		}
		l.Nodes = append(l.Nodes, LayoutNode{int32(n), role})
	}
	return l, nil
}

// CheckLayout compares want with the layout dataDir holds: its
// meta.properties or, for a data dir of a release before it, the
// cluster.yaml `txncoord up` wrote there (legacy, which turns that file
// into a layout; nil when there is none). A new data dir, or one with the
// same layout, is fine; another layout is ErrLayoutChanged, in one line
// naming both and what to do.
func CheckLayout(dataDir string, want Layout, legacy func(*cluster.File) Layout) error {
	path := filepath.Join(dataDir, LayoutFile)
	var have Layout
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if have, err = parseLayout(raw); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	case !os.IsNotExist(err):
		return err
	case legacy == nil:
		return nil
	default:
		f, err := cluster.Load(filepath.Join(dataDir, "cluster.yaml"))
		if err != nil {
			return nil // a new data dir (a bad file is the store check's to report)
		}
		have = legacy(f)
	}
	if have.equal(want) {
		return nil
	}
	return fmt.Errorf("%w: data dir %s holds %s, but this start has %s: node ids and the placement of partitions and transactional ids "+
		"would change and its data would not be found; start with the layout it holds, use a new --data-dir, "+
		"or --force-new-cluster to move its state aside", ErrLayoutChanged, dataDir, have, want)
}

// WriteLayout stores l as dataDir's meta.properties.
func WriteLayout(dataDir string, l Layout) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dataDir, LayoutFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, l.encode(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
