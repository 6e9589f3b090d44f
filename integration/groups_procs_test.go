package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/integration/faultproxy"
	"github.com/txncoord/txncoord/internal/freeport"
)

// The group coordinator's state through SIGKILL of the process that runs
// it: `txncoord up` (every node in one process, one shared store) and a
// `txncoord coordinator` process of its own (leaders in their own
// processes, the groups' records in the coordinator's store). Each
// process runs with its admin API on, so the test reads its /metrics:
// the markers of __consumer_offsets reach the group coordinator
// in-process, never over a TCP connection from the node to itself.

// startGroupsUp runs `txncoord up` (as startUpProcess: a coordinator and
// three 4.2 leaders on consecutive free ports) with its admin API on.
func startGroupsUp(t *testing.T) (pc *procCluster, bounce func()) {
	t.Helper()
	base, err := freeport.Run(4)
	if err != nil {
		t.Fatal(err)
	}
	pc = &procCluster{t: t, bin: txncoordBinary(t), dir: t.TempDir(), Leaders: map[int32]*proc{}, Proxies: map[int32]*faultproxy.Proxy{}}
	pc.coordAt = fmt.Sprintf("127.0.0.1:%d", base)
	for i := range 4 {
		pc.seeds = append(pc.seeds, fmt.Sprintf("127.0.0.1:%d", base+i))
	}
	pc.upArgs = []string{"up", "--data-dir", filepath.Join(pc.dir, "data"), "--listen", pc.coordAt,
		"--leaders", "4.2,4.2,4.2", "--topics", wireTopic + ":3", "--admin-listen=" + freeAddr(t)}
	pc.StartCoordinator()
	return pc, pc.BounceCoordinator
}

// startGroupsCoordinator runs a `txncoord coordinator` process, with its
// admin API, and two leader processes.
func startGroupsCoordinator(t *testing.T) (pc *procCluster, bounce func()) {
	t.Helper()
	pc = startProcCluster(t, "4.2", []string{"4.2", "4.2"}, map[string]int32{wireTopic: 3})
	admin := freeAddr(t)
	start := func() {
		pc.Coord = startProc(t, "coordinator", pc.dir, pc.bin, "coordinator", "--cluster", pc.coordCF,
			"--data-dir", filepath.Join(pc.dir, "coordinator-data"), "--admin-listen="+admin)
	}
	pc.Coord.kill()
	start()
	return pc, func() { pc.Coord.kill(); start() }
}

// scrapeGroupMarkers sums txncoord_group_markers_total of the process's
// /metrics by transport.
func scrapeGroupMarkers(ctx context.Context, t *testing.T, p *proc) map[string]float64 {
	t.Helper()
	i := strings.Index(p.ready, "admin=")
	if i < 0 {
		t.Fatalf("%s: no admin URL in %q", p.name, p.ready)
	}
	url := strings.Fields(p.ready[i+len("admin="):])[0] + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "txncoord_group_markers_total{") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		for _, tr := range []string{"in_process", "tcp"} {
			if strings.Contains(line, `transport="`+tr+`"`) {
				out[tr] += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGroupsSurviveSIGKILLUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts txncoord processes")
	}
	pc, bounce := startGroupsUp(t)
	groupsSurviveSIGKILL(t, pc, bounce)
}

func TestGroupsSurviveSIGKILLCoordinatorProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts txncoord processes")
	}
	pc, bounce := startGroupsCoordinator(t)
	groupsSurviveSIGKILL(t, pc, bounce)
}

// groupsSurviveSIGKILL: a kgo group member commits its offsets, a raw
// transactional id commits offsets in one transaction and leaves the next
// one's pending; the process is SIGKILLed and started again on the same
// ports and data dir. Then the committed offsets are there, the group is
// Stable with the same member, which commits again at the same
// generation and member id (it was not made to rejoin), the pending
// offsets are still pending (UNSTABLE_OFFSET_COMMIT) and the same
// producer id and epoch commit them. Before and after the kill, every
// marker of __consumer_offsets came in-process.
func groupsSurviveSIGKILL(t *testing.T, pc *procCluster, bounce func()) {
	ctx := testCtx(t, 90*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.Bootstrap()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 30
	produce := func(from int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: wireTopic, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	produce(0)

	// A kgo member consumes everything and commits.
	member, err := kgo.NewClient(kgo.SeedBrokers(pc.Bootstrap()...), kgo.ConsumerGroup("g-kill"), kgo.ConsumeTopics(wireTopic),
		kgo.DisableAutoCommit(), kgo.HeartbeatInterval(200*time.Millisecond), kgo.ClientID("kill-member"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	consume := func(want int) {
		t.Helper()
		got := 0
		for got < want {
			fs := member.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", got, want)
			}
			got += fs.NumRecords()
		}
		if err := member.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	consume(n)
	memberID, gen := member.GroupMetadata()
	adm := kadm.NewClient(cl)
	checkCommitted := func(when string) {
		t.Helper()
		want := map[int32]int64{}
		ends, err := adm.ListEndOffsets(ctx, wireTopic)
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
		got, err := adm.FetchOffsets(ctx, "g-kill")
		if err != nil {
			t.Fatalf("%s: fetch offsets: %v", when, err)
		}
		if len(want) != 3 {
			t.Fatalf("%s: end offsets %v", when, want)
		}
		for p, end := range want {
			if end == 0 {
				t.Fatalf("%s: nothing produced to %s-%d: the keys should spread the records", when, wireTopic, p)
			}
			if o, ok := got.Lookup(wireTopic, p); !ok || o.At != end {
				t.Errorf("%s: %s-%d committed %+v, want %d", when, wireTopic, p, o, end)
			}
		}
	}
	checkCommitted("before the kill")

	// A transaction commits offsets; the next one leaves them pending.
	w := newWireTxn(ctx, t, cl, "kill-txn", "g-kill-txn")
	w.commitOffsets(ctx, map[int32]int64{0: 5, 1: 6})
	w.end(ctx, true)
	waitOffsets(ctx, t, cl, w.group, map[int32]int64{0: 5, 1: 6})
	if m := scrapeGroupMarkers(ctx, t, pc.Coord); m["in_process"] < 1 || m["tcp"] != 0 {
		t.Errorf("before the kill: markers of __consumer_offsets by transport %v, want in_process ≥ 1 and no tcp", m)
	}
	w.commitOffsets(ctx, map[int32]int64{0: 8})

	bounce()

	checkCommitted("after the kill")
	groups, err := adm.DescribeGroups(ctx, "g-kill")
	if err != nil {
		t.Fatal(err)
	}
	g := groups["g-kill"]
	if g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != memberID {
		t.Errorf("after the kill: group %s %s members %+v, want Stable with %s", g.Group, g.State, g.Members, memberID)
	} else if a, ok := g.Members[0].Assigned.AsConsumer(); !ok || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 3 {
		t.Errorf("after the kill: assignment %+v, want the 3 partitions of %s", g.Members[0].Assigned, wireTopic)
	}
	// The member goes on at its generation: more records, another commit.
	produce(n)
	consume(n)
	if id, g := member.GroupMetadata(); id != memberID || g != gen {
		t.Errorf("member after the kill: %s generation %d, want %s generation %d (no rejoin)", id, g, memberID, gen)
	}
	checkCommitted("after the member's next commit")

	// The open transaction's offsets: still pending, then committed by
	// the same producer id and epoch.
	got := fetchOffsets(ctx, t, cl, w.group, true, 0, 1)
	if got[0].code != kerr.UnstableOffsetCommit.Code || got[1] != (fetched{6, 0}) {
		t.Errorf("after the kill: stable fetch %+v, want partition 0 UNSTABLE_OFFSET_COMMIT, partition 1 at 6", got)
	}
	w.end(ctx, true)
	waitOffsets(ctx, t, cl, w.group, map[int32]int64{0: 8, 1: 6})
	if m := scrapeGroupMarkers(ctx, t, pc.Coord); m["in_process"] < 1 || m["tcp"] != 0 {
		t.Errorf("after the kill: markers of __consumer_offsets by transport %v, want in_process ≥ 1 and no tcp", m)
	}
}
