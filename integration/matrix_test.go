package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
	"github.com/txncoord/txncoord/leaderstub"
	"github.com/txncoord/txncoord/negotiation"
)

// The version matrix: coordinator × leader set × client. Every
// cell is a named subtest, coord=V/leaders=SET/client=C, that runs a short
// workload (about 1/3 aborts) through the checker and then checks, at each
// leader, the WriteTxnMarkers version and TV of every marker of that cell.
//
// One cluster serves the four clients of a (coordinator, leaders) pair, each
// client on its own topic, so markers are told apart by topic. The clients
// run concurrently inside the cluster's subtest (t.Parallel would cap them
// at GOMAXPROCS); the cell subtests then judge the results.

var matrixCoordinators = []string{"4.2", "4.1"}

type matrixLeaderSet struct {
	name     string
	versions []string
}

var matrixLeaderSets = []matrixLeaderSet{
	{"all-4.2", []string{"4.2", "4.2"}},
	{"mixed-4.2-4.1", []string{"4.2", "4.1"}},
	{"all-4.1", []string{"4.1", "4.1"}},
	{"one-3.9", []string{"4.2", "3.9"}}, // TV2 off cluster-wide
}

// matrixNewest is the newest coordinator over one leader of every release
// that speaks WriteTxnMarkers v2 or v1 (4.4 down to 4.1): the cross product
// above covers the 4.2 coordinator's rules, this pair that later releases
// keep them.
var matrixNewest = matrixPair{"4.4", matrixLeaderSet{"mixed-4.4-4.1", []string{"4.4", "4.3", "4.2", "4.1"}}}

// matrixPair is one cluster of the matrix: a coordinator version over a
// leader set.
type matrixPair struct {
	coordinator string
	leaders     matrixLeaderSet
}

// matrixPairs lists every pair the matrix runs.
func matrixPairs() []matrixPair {
	var pairs []matrixPair
	for _, coord := range matrixCoordinators {
		for _, set := range matrixLeaderSets {
			pairs = append(pairs, matrixPair{coord, set})
		}
	}
	return append(pairs, matrixNewest)
}

var matrixClients = []string{"kgo-tv2", "kgo-tv1", "sarama", "confluent"}

// expectedMarker is the WriteTxnMarkers version and decoded TV a leader
// must see: min(coordinator max, leader max) — a 4.1 coordinator sends only
// v1, a 4.2+ one v2 to 4.2+ leaders and v1 to older ones — and TV 2 only
// for a TV2 client in a cluster that finalizes TV2, and only at v2 (at v1
// the field does not exist and the leader decodes 0).
func expectedMarker(coordinator, leader, client string, leaders []string) (version int16, tv int8) {
	version = min(negotiation.MaxVersion(coordinator, 27), negotiation.MaxVersion(leader, 27))
	tv2Cluster := !slices.Contains(leaders, "3.9")
	if version == 2 && client == "kgo-tv2" && tv2Cluster {
		tv = 2
	}
	return version, tv
}

// cellResult is what one client's run left for its cell to judge.
type cellResult struct {
	report *checker.Report
	err    error
}

// matrixSeen collects, per cell, what each leader received, for
// testdata/matrix.txt.
type matrixSeen struct {
	mu    sync.Mutex
	cells map[string]string
}

func (m *matrixSeen) record(cell, seen string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cells[cell] = seen
}

const matrixHeader = `# WriteTxnMarkers as received at each leader, per matrix cell (TestMatrix).
# vN/tvM: request version N, TransactionVersion M as the leader decoded it
# (at v1 the field does not exist: 0). The 4.2 and 4.4 coordinators negotiate
# per leader (KIP-1228 with the 4.2.1 discovery fix); the 4.1 coordinator sends
# only v1; only a TV2 client in a cluster finalizing TV2 has TV 2; a 3.9
# leader turns TV2 off cluster-wide. Refresh: go test ./integration -run TestMatrix -rewrite
`

func TestMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the matrix runs 32 cells")
	}
	seen := &matrixSeen{cells: map[string]string{}}
	// Cleanups run after the parallel subtests have finished.
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		var b strings.Builder
		for _, pair := range matrixPairs() {
			coord, set := pair.coordinator, pair.leaders
			for _, client := range matrixClients {
				cell := matrixCell(coord, set.versions, client)
				fmt.Fprintf(&b, "%-52s -> %s\n", cell, seen.cells[cell])
			}
		}
		goldenTable(t, "matrix.txt", matrixHeader, b.String())
	})
	for _, pair := range matrixPairs() {
		coord, set := pair.coordinator, pair.leaders
		t.Run(fmt.Sprintf("coord=%s/leaders=%s", coord, set.name), func(t *testing.T) {
			t.Parallel()
			runMatrixCluster(t, Options{CoordinatorVersion: coord, LeaderVersions: set.versions}, seen)
		})
	}
}

func matrixCell(coord string, leaders []string, client string) string {
	return fmt.Sprintf("coord=%s leaders=%s client=%s", coord, strings.Join(leaders, ","), client)
}

// runMatrixCluster starts the cluster o describes (coordinator and leader
// versions; Secure for TestMatrixSecure), runs every client's cell on it and
// judges each in a client=C subtest. seen may be nil.
func runMatrixCluster(t *testing.T, o Options, seen *matrixSeen) {
	coord, leaders := o.CoordinatorVersion, o.LeaderVersions
	topics := map[string]int32{}
	parts := int32(2 * len(leaders)) // consecutive partitions cover every leader
	for _, client := range matrixClients {
		topics["m-"+client] = parts
	}
	o.Topics = topics
	c := StartCluster(t, o)
	ctx := testCtx(t, 2*time.Minute)

	results := make(map[string]cellResult)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, client := range matrixClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := runCell(ctx, c, client, parts, int64(i+3))
			mu.Lock()
			results[client] = cellResult{r, err}
			mu.Unlock()
		}()
	}
	wg.Wait()

	for _, client := range matrixClients {
		t.Run("client="+client, func(t *testing.T) {
			res := results[client]
			if res.err != nil {
				t.Fatal(res.err)
			}
			r := res.report
			t.Logf("%s", r.Summary())
			if r.Anomalies() != 0 {
				t.Fatalf("anomalies:\n%s", r.Table())
			}
			if r.TxnsCommitted == 0 || r.TxnsAborted == 0 {
				t.Fatalf("the cell needs commits and aborts:\n%s", r.Table())
			}
			markers := checkCellMarkers(t, c, coord, leaders, client)
			if seen != nil {
				seen.record(matrixCell(coord, leaders, client), markers)
			}
		})
	}
}

// runCell runs one client's workload on its own topic and checks the
// history against a read_committed read; on a Secure cluster both go
// through TLS + SASL as the client user.
func runCell(ctx context.Context, c *Cluster, client string, parts int32, seed int64) (*checker.Report, error) {
	topic := "m-" + client
	var ps []checker.Partition
	for p := int32(0); p < parts; p++ {
		ps = append(ps, checker.Partition{Topic: topic, Partition: p})
	}
	h, err := workload.Drivers[client](ctx, workload.Config{
		Bootstrap:       c.Bootstrap(),
		TransactionalID: "matrix-" + client,
		Partitions:      ps,
		TxnSize:         4,
		Txns:            6,
		AbortP:          0.34,
		Seed:            seed,
		OpTimeout:       30 * time.Second,
		Security:        c.workloadSecurity(),
		Log:             zerolog.New(zerolog.NewTestWriter(c.t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", client, err)
	}
	reads, err := workload.ReadCommittedSecure(ctx, c.Bootstrap(), c.workloadSecurity(), ps)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", client, err)
	}
	return checker.Check(h, reads)
}

// checkCellMarkers asserts that every leader received markers for the
// cell's topic, all accepted, at the expected version and TV, and returns
// what each leader saw ("leader1(4.2)=v2/tv2 ...").
func checkCellMarkers(t *testing.T, c *Cluster, coord string, leaders []string, client string) string {
	t.Helper()
	topic := "m-" + client
	var seen []string
	for i, l := range c.Leaders {
		wantVersion, wantTV := expectedMarker(coord, leaders[i], client, leaders)
		var ms []leaderstub.ReceivedMarker
		for _, m := range l.Leader.ReceivedMarkers() {
			if m.Topic == topic {
				ms = append(ms, m)
			}
		}
		if len(ms) == 0 {
			t.Fatalf("leader %d (%s) received no marker for %s", l.Node.NodeID, leaders[i], topic)
		}
		for _, m := range ms {
			if m.RequestVersion != wantVersion || m.TransactionVersion != wantTV || m.ErrorCode != 0 {
				t.Fatalf("leader %d (%s) received %+v, want WriteTxnMarkers v%d TV %d accepted", l.Node.NodeID, leaders[i], m, wantVersion, wantTV)
			}
		}
		t.Logf("leader %d (%s): %d markers, all v%d TV %d", l.Node.NodeID, leaders[i], len(ms), wantVersion, wantTV)
		seen = append(seen, fmt.Sprintf("leader%d(%s)=v%d/tv%d", l.Node.NodeID, leaders[i], wantVersion, wantTV))
		// A v1 marker hides the TV; the epochs still show the protocol:
		// a TV2 client's epoch is bumped by every EndTxn, so its markers
		// leave epoch 0 behind; a TV1 client keeps epoch 0 while healthy.
		maxEpoch := int16(0)
		for _, m := range ms {
			maxEpoch = max(maxEpoch, m.ProducerEpoch)
		}
		if tv2 := client == "kgo-tv2" && !slices.Contains(leaders, "3.9"); tv2 != (maxEpoch > 0) {
			t.Fatalf("leader %d: highest marker epoch %d, but the client ran TV2=%v", l.Node.NodeID, maxEpoch, tv2)
		}
	}
	return strings.Join(seen, " ")
}
