package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The scale mode: many transactional ids, each committing one transaction
// per interval on a kgo client of its own, and many consumer groups of two
// members committing offsets per interval, against one running cluster;
// then one coordinator killed, to time how long each id and each group
// waits to be served again.

// ScaleConfig is one scale run.
type ScaleConfig struct {
	IDs      int           // transactional ids, one kgo client each
	Groups   int           // consumer groups, GroupMembers kgo clients each
	Interval time.Duration // each id begins a transaction, each member commits offsets, once per interval
	// Ramp bounds how long the clients may take to be served once (their
	// first transaction, their first assignment and offset commit).
	Ramp       time.Duration
	Window     time.Duration // the steady-state window
	AfterKill  time.Duration // how long to watch after the kill (0: no kill)
	KillNode   int           // the node killed through /v1/faults
	Topic      string        // the producers' topic (exists)
	GroupTopic string        // the groups' topic (created here, no records: the members' fetches stay idle)
	ValueBytes int
	StartRate  int    // clients started per second (their first request), in the ramp
	Prefix     string // transactional ids and group names start with it
	// Driver is how the ids are driven: DriverKgo (a kgo client each) or
	// DriverRaw (RawClients kgo clients issuing the transactions' requests
	// themselves for every id).
	Driver     string
	RawClients int
	// TxnStatePartitions is the cluster's __transaction_state partition
	// count (the raw driver groups the ids by partition).
	TxnStatePartitions int32
}

// The ids' drivers.
const (
	DriverKgo = "kgo"
	DriverRaw = "raw"
)

// ScaleServer is the cluster a scale run drives: `up` in one process, or
// every node and etcd member in a process of its own.
type ScaleServer struct {
	Bootstrap []string
	Procs     []scaleProc
	// AdminURL is profiled over the window ("" for none).
	AdminURL string
	// EtcdMetricsURL is the etcd member whose /metrics is scraped.
	EtcdMetricsURL string
	KillHow        string // how Kill kills, for the report
	// Kill kills a coordinator; Restore (nil for none) undoes it before
	// the clients close.
	Kill    func(ctx context.Context, node int) error
	Restore func(ctx context.Context)
}

// ProcFigures are one server process's figures over the window.
type ProcFigures struct {
	Name, Role   string
	CPU          time.Duration
	RSS, PeakRSS int64
}

// GroupMembers is how many members each group of the scale run has.
const GroupMembers = 2

// closeClientsWithin bounds the clients' Close at the end of a run.
const closeClientsWithin = 15 * time.Second

// scaleTick is the timeline's resolution.
const scaleTick = time.Second

// ScaleResult is what one scale run measured.
type ScaleResult struct {
	Config ScaleConfig
	// ReadyIDs and ReadyMembers are the clients served once before the
	// window opened (Ramp bounds the wait).
	ReadyIDs, ReadyMembers int
	RampTook               time.Duration

	Elapsed        time.Duration
	Txns           int64 // committed in the window
	TxnFailed      int64
	Commits        int64 // successful offset commits (one request of one member) in the window
	CommitFailed   int64
	TxnLatency     *hdrhistogram.Histogram // Begin → EndTransaction returned, µs, window only
	OffsetLatency  *hdrhistogram.Histogram // CommitOffsetsSync, µs, window only
	ServerCPU      time.Duration           // the server's processes over the window
	Procs          []ProcFigures           // each server process
	KillHow        string
	DriverCPU      time.Duration // this process (every client) over the window
	ServerRSS      int64         // VmRSS at the window's end, summed over the processes
	ServerPeakRSS  int64         // VmHWM at the window's end, summed
	DriverRSS      int64         // this process's VmRSS at the window's end
	DriverSockets  int           // this process's open sockets in the window: the clients' connections
	Etcd           *EtcdFigures  // proposals per txn etc. (per committed transaction of the window)
	EtcdProposals  float64       // etcd_server_proposals_committed_total over the window
	CPUBy          map[string]time.Duration
	ProfileErr     string
	Errors         []string
	Kill           *KillFigures
	TxnTimeline    []int64 // transactions committed per scaleTick since the window opened
	CommitTimeline []int64 // offset commits per scaleTick since the window opened
}

// KillFigures is what followed the kill.
type KillFigures struct {
	At        time.Duration // since the window opened
	Node      int
	Affected  int           // ids with no commit for more than 2 intervals after the kill
	IDsServed time.Duration // kill → the last id's first commit after it (every id served again)
	IDsLeft   int           // ids never served again within AfterKill
	// GroupsServed is kill → the last group's first offset commit after it
	// (a group is served when any member commits); MembersServed the same
	// for every member.
	GroupsServed, MembersServed time.Duration
	GroupsLeft, MembersLeft     int
	// RateRecovered is kill → the start of the first 3 ticks in a row at
	// >= 90% of the window's rate, -1 when it never did: of transactions,
	// CommitRateRecovered of offset commits.
	RateRecovered, CommitRateRecovered time.Duration
	AffectedGroups                     int
	// IDGap is the longest time an id went without a commit across the
	// kill (its last commit before it to its first after): with one
	// transaction per interval, an id served all along shows about an
	// interval here, so what exceeds it is the kill's.
	IDGap time.Duration
}

// timeline counts events per scaleTick since the window opened.
type timeline struct {
	mu    sync.Mutex
	ticks []int64
}

// maxTicks bounds a timeline (an hour of ticks).
const maxTicks = 3600

// add counts an event at now; nothing before start (unix ns, 0 = the
// window has not opened) or past maxTicks.
func (t *timeline) add(start int64, now time.Time) {
	if start == 0 {
		return
	}
	i := int((now.UnixNano() - start) / int64(scaleTick))
	if i < 0 || i >= maxTicks {
		return
	}
	t.mu.Lock()
	for len(t.ticks) <= i {
		t.ticks = append(t.ticks, 0)
	}
	t.ticks[i]++
	t.mu.Unlock()
}

// scaleClock is shared by every client goroutine: the phase marks and the
// window's counters.
type scaleClock struct {
	windowStart   atomic.Int64 // unix ns; 0 before the window
	windowEnd     atomic.Int64 // unix ns; 0 while the window is open
	killAt        atomic.Int64 // unix ns; 0 before the kill
	txns, commits opStats
	mu            sync.Mutex
	errs          map[string]bool
}

// opStats counts one kind of operation (transactions, offset commits).
type opStats struct {
	ticks    timeline     // successes per tick from the window's start, to the run's end
	ok, fail atomic.Int64 // in the window
	mu       sync.Mutex
	lat      *hdrhistogram.Histogram // successes in the window, µs
}

// results are st's window counts and a copy of its latencies and ticks.
func (st *opStats) results() (ok, fail int64, lat *hdrhistogram.Histogram, ticks []int64) {
	st.mu.Lock()
	lat = hdrhistogram.Import(st.lat.Export())
	st.mu.Unlock()
	st.ticks.mu.Lock()
	ticks = append([]int64(nil), st.ticks.ticks...)
	st.ticks.mu.Unlock()
	return st.ok.Load(), st.fail.Load(), lat, ticks
}

func (c *scaleClock) inWindow(t time.Time) bool {
	s, e := c.windowStart.Load(), c.windowEnd.Load()
	return s != 0 && t.UnixNano() >= s && (e == 0 || t.UnixNano() < e)
}

func (c *scaleClock) noteErr(err error) {
	c.mu.Lock()
	if len(c.errs) < 8 {
		c.errs[err.Error()] = true
	}
	c.mu.Unlock()
}

// served is one client's first success and first success after the kill.
type served struct {
	first, afterKill, lastBeforeKill atomic.Int64
}

func (s *served) ok(c *scaleClock, now time.Time) {
	ns := now.UnixNano()
	s.first.CompareAndSwap(0, ns)
	if k := c.killAt.Load(); k != 0 && ns > k {
		s.afterKill.CompareAndSwap(0, ns)
	} else {
		s.lastBeforeKill.Store(ns)
	}
}

// RunScale drives cfg against inst (a running `txncoord up`) and measures.
// windowEnd, if set, runs as the window closes.
func RunScale(ctx context.Context, srv *ScaleServer, cfg ScaleConfig, profileDir string, windowEnd func()) (*ScaleResult, error) {
	res := &ScaleResult{Config: cfg, KillHow: srv.KillHow}
	admin, err := kgo.NewClient(kgo.SeedBrokers(srv.Bootstrap...))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if cfg.Groups > 0 {
		if _, err := kadm.NewClient(admin).CreateTopic(ctx, GroupMembers, -1, nil, cfg.GroupTopic); err != nil &&
			!errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("create %s: %w", cfg.GroupTopic, err)
		}
	}
	var parts [][]int32
	if cfg.IDs > 0 {
		if parts, err = partitionGroups(ctx, srv.Bootstrap, cfg.Topic, cfg.IDs, 2); err != nil {
			return nil, err
		}
	}

	clk := &scaleClock{errs: map[string]bool{}}
	clk.txns.lat, clk.commits.lat = newLatencyHistogram(), newLatencyHistogram()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ids := make([]served, cfg.IDs)
	members := make([]served, cfg.Groups*GroupMembers)
	var clients sync.WaitGroup
	var clientsMu sync.Mutex
	var all []*kgo.Client
	// run keeps cl (closed at the end) and runs op on it, as the n-th
	// client of the ramp.
	run := func(cl *kgo.Client, st *opStats, s *served, n int, op func() (bool, error)) {
		clientsMu.Lock()
		all = append(all, cl)
		clientsMu.Unlock()
		clients.Add(1)
		go func() {
			defer clients.Done()
			pacedLoop(runCtx, clk, st, s, cfg.Interval, startDelay(n, cfg.StartRate), uint64(n), op)
		}()
	}
	value := make([]byte, cfg.ValueBytes)
	var raw *rawDriver
	if cfg.Driver == DriverRaw && cfg.IDs > 0 {
		if raw, err = newRawDriver(ctx, srv.Bootstrap, cfg, parts, value); err != nil {
			return nil, err
		}
		all = append(all, raw.clients...)
	}
	for i := range cfg.IDs {
		if raw != nil {
			clients.Add(1)
			go func() {
				defer clients.Done()
				pacedLoop(runCtx, clk, &clk.txns, &ids[i], cfg.Interval, startDelay(i, cfg.StartRate), uint64(i), raw.op(runCtx, i))
			}()
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Bootstrap...),
			kgo.TransactionalID(fmt.Sprintf("%s-id-%d", cfg.Prefix, i)),
			kgo.DefaultProduceTopic(cfg.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0))
		if err != nil {
			return nil, err
		}
		run(cl, &clk.txns, &ids[i], i, idOp(runCtx, cl, parts[i], value))
	}
	for g := range cfg.Groups {
		for m := range GroupMembers {
			asg := &assignment{}
			// The eager (range) balancer hands out whole assignments, so
			// the callbacks set and clear the member's view of them.
			cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Bootstrap...),
				kgo.ConsumerGroup(fmt.Sprintf("%s-group-%d", cfg.Prefix, g)), kgo.ConsumeTopics(cfg.GroupTopic),
				kgo.DisableAutoCommit(), kgo.Balancers(kgo.RangeBalancer()),
				kgo.OnPartitionsAssigned(asg.set), kgo.OnPartitionsRevoked(asg.clear), kgo.OnPartitionsLost(asg.clear))
			if err != nil {
				return nil, err
			}
			n := g*GroupMembers + m
			run(cl, &clk.commits, &members[n], cfg.IDs+n, memberOp(runCtx, cl, asg))
		}
	}
	defer func() {
		stop()
		// A group member's Close leaves its group, which kgo retries for
		// long against a coordinator that is down: the clients get a
		// bounded time to close, then the run goes on without them.
		done := make(chan struct{})
		go func() {
			var wg sync.WaitGroup
			for _, cl := range all {
				wg.Add(1)
				go func() { defer wg.Done(); cl.Close() }()
			}
			wg.Wait()
			clients.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(closeClientsWithin):
		}
	}()

	// The ramp: every client served once, or Ramp over.
	rampStart := time.Now()
	for time.Since(rampStart) < cfg.Ramp && ctx.Err() == nil {
		if countFirst(ids) == len(ids) && countFirst(members) == len(members) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.RampTook = time.Since(rampStart)
	res.ReadyIDs, res.ReadyMembers = countFirst(ids), countFirst(members)

	// The steady window.
	sample := func() (cpu []time.Duration, drv time.Duration, m Metrics) {
		for _, p := range srv.Procs {
			c, _ := p.inst.CPU()
			cpu = append(cpu, c)
		}
		drv, _ = processCPU(os.Getpid())
		m = Metrics{}
		if srv.EtcdMetricsURL != "" {
			if e, err := scrapeMetrics(ctx, srv.EtcdMetricsURL); err == nil {
				keepEtcd(m, e)
			}
		}
		return
	}
	var prof *windowProfile
	if profileDir != "" && srv.AdminURL != "" {
		prof = &windowProfile{adminURL: srv.AdminURL, path: profileDir + "/scale-window.pprof",
			workload: Workload{Duration: cfg.Window}}
	}
	srv0, drv0, m0 := sample()
	stopClientProfile := profileClients(profileDir)
	start := time.Now()
	clk.windowStart.Store(start.UnixNano())
	prof.start(ctx)
	sleepCtx(ctx, cfg.Window/2)
	res.DriverSockets = countSockets()
	sleepCtx(ctx, cfg.Window-cfg.Window/2)
	end := time.Now()
	clk.windowEnd.Store(end.UnixNano())
	stopClientProfile()
	if windowEnd != nil {
		windowEnd()
	}
	srv1, drv1, m1 := sample()
	res.Elapsed = end.Sub(start)
	res.DriverCPU = drv1 - drv0
	for i, p := range srv.Procs {
		f := ProcFigures{Name: p.Name, Role: p.Role, CPU: srv1[i] - srv0[i]}
		f.RSS, _ = statusKB(p.inst.Pid, "VmRSS:")
		f.PeakRSS, _ = p.inst.PeakRSS()
		res.Procs = append(res.Procs, f)
		res.ServerCPU += f.CPU
		res.ServerRSS += f.RSS
		res.ServerPeakRSS += f.PeakRSS
	}
	res.Txns, res.TxnFailed, res.TxnLatency, _ = clk.txns.results()
	res.Commits, res.CommitFailed, res.OffsetLatency, _ = clk.commits.results()
	res.DriverRSS, _ = statusKB(os.Getpid(), "VmRSS:")
	d := m1.delta(m0)
	res.Etcd = etcdFigures(d, res.Elapsed, res.Txns)
	res.EtcdProposals = d[metricEtcdProposals]
	res.CPUBy, res.ProfileErr = prof.split(ctx, &Result{Committed: max(1, res.Txns+res.Commits)}, res.ServerCPU)

	if cfg.AfterKill > 0 && ctx.Err() == nil {
		killAt := time.Now()
		clk.killAt.Store(killAt.UnixNano())
		if err := srv.Kill(ctx, cfg.KillNode); err != nil {
			return res, fmt.Errorf("kill: %w", err)
		}
		sleepCtx(ctx, cfg.AfterKill)
		if srv.Restore != nil {
			// The killed node restarts, so that the clients close
			// against a whole cluster.
			defer srv.Restore(ctx)
		}
		k := &KillFigures{At: killAt.Sub(start), Node: cfg.KillNode}
		k.IDsServed, k.IDsLeft, k.Affected = servedAgain(ids, 1, killAt, 2*cfg.Interval)
		k.IDGap = longestGap(ids)
		k.MembersServed, k.MembersLeft, _ = servedAgain(members, 1, killAt, 2*cfg.Interval)
		k.GroupsServed, k.GroupsLeft, k.AffectedGroups = servedAgain(members, GroupMembers, killAt, 2*cfg.Interval)
		killTick := int(killAt.Sub(start) / scaleTick)
		_, _, _, ticks := clk.txns.results()
		k.RateRecovered = rateRecovered(ticks, killTick, float64(res.Txns)/res.Elapsed.Seconds(), 0.9, 3)
		_, _, _, ticks = clk.commits.results()
		k.CommitRateRecovered = rateRecovered(ticks, killTick, float64(res.Commits)/res.Elapsed.Seconds(), 0.9, 3)
		res.Kill = k
	}
	_, _, _, res.TxnTimeline = clk.txns.results()
	_, _, _, res.CommitTimeline = clk.commits.results()
	for e := range clk.errs {
		res.Errors = append(res.Errors, e)
	}
	return res, ctx.Err()
}

// profileClients takes a CPU profile of this process (the clients) into
// dir/clients-window.pprof until the returned func is called; nothing
// without dir.
func profileClients(dir string) func() {
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, "clients-window.pprof"))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// pacedLoop runs op once per interval from delay plus a random phase (an
// op that takes longer than the interval delays the next one, as a real
// client would) until ctx ends, counting each outcome in st and s. op
// returns false when it had nothing to do (a member not assigned yet).
func pacedLoop(ctx context.Context, clk *scaleClock, st *opStats, s *served, interval, delay time.Duration, seed uint64,
	op func() (bool, error)) {
	rng := rand.New(rand.NewPCG(seed, 0x7363616c65))
	next := time.Now().Add(delay + time.Duration(rng.Int64N(int64(interval))))
	for {
		sleepCtx(ctx, time.Until(next))
		if ctx.Err() != nil {
			return
		}
		next = next.Add(interval)
		if now := time.Now(); next.Before(now) {
			next = now
		}
		begin := time.Now()
		did, err := op()
		done := time.Now()
		if ctx.Err() != nil {
			return
		}
		if !did {
			continue
		}
		if err != nil {
			if clk.inWindow(begin) {
				st.fail.Add(1)
				clk.noteErr(err)
			}
			continue
		}
		s.ok(clk, done)
		st.ticks.add(clk.windowStart.Load(), done)
		if clk.inWindow(done) {
			st.ok.Add(1)
			st.mu.Lock()
			recordLatency(st.lat, done.Sub(begin))
			st.mu.Unlock()
		}
	}
}

// idOp is one transactional id's transaction.
func idOp(ctx context.Context, cl *kgo.Client, parts []int32, value []byte) func() (bool, error) {
	return func() (bool, error) { return true, oneTxn(ctx, cl, parts, value) }
}

func oneTxn(ctx context.Context, cl *kgo.Client, parts []int32, value []byte) error {
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	recs := make([]*kgo.Record, len(parts))
	for i, p := range parts {
		recs[i] = &kgo.Record{Partition: p, Value: value}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("produce: %w", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("end transaction: %w", err)
	}
	return nil
}

// startDelay is when client i starts in the ramp, at rate clients per
// second (0: all at once).
func startDelay(i, rate int) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(i) * time.Second / time.Duration(rate)
}

// memberOp is one group member's offset commit: an offset one higher
// than its last for each partition it is assigned (nothing before its
// first assignment). The offsets need no records: a commit is what is
// measured.
func memberOp(ctx context.Context, cl *kgo.Client, asg *assignment) func() (bool, error) {
	var offset int64
	return func() (bool, error) {
		offsets := map[string]map[int32]kgo.EpochOffset{}
		for topic, ps := range asg.current() {
			offsets[topic] = map[int32]kgo.EpochOffset{}
			for _, p := range ps {
				offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: offset + 1}
			}
		}
		if len(offsets) == 0 {
			return false, nil
		}
		offset++
		return true, commitSync(ctx, cl, offsets)
	}
}

// assignment is a member's partitions, kept by kgo's rebalance callbacks.
type assignment struct {
	mu    sync.Mutex
	parts map[string][]int32
}

func (a *assignment) set(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	a.mu.Lock()
	a.parts = parts
	a.mu.Unlock()
}

func (a *assignment) clear(context.Context, *kgo.Client, map[string][]int32) {
	a.mu.Lock()
	a.parts = nil
	a.mu.Unlock()
}

func (a *assignment) current() map[string][]int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.parts
}

// commitSync commits offsets and returns the first error, the request's or
// a partition's.
func commitSync(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	var first error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			first = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && first == nil {
					first = fmt.Errorf("offset commit %s[%d]: error code %d", t.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
	})
	return first
}

func countFirst(ss []served) int {
	n := 0
	for i := range ss {
		if ss[i].first.Load() != 0 {
			n++
		}
	}
	return n
}

// servedAgain takes ss in units of per consecutive clients (an id: 1; a
// group: its members), a unit served again at its earliest client's first
// success after the kill. It returns kill → the last unit served again,
// how many units were never served again, and how many waited longer than
// gap.
func servedAgain(ss []served, per int, killAt time.Time, gap time.Duration) (worst time.Duration, left, affected int) {
	k := killAt.UnixNano()
	for u := 0; u+per <= len(ss); u += per {
		var first int64
		for c := u; c < u+per; c++ {
			if a := ss[c].afterKill.Load(); a != 0 && (first == 0 || a < first) {
				first = a
			}
		}
		if first == 0 {
			left++
			continue
		}
		d := time.Duration(first - k)
		worst = max(worst, d)
		if d > gap {
			affected++
		}
	}
	return worst, left, affected
}

// longestGap is the longest time from a client's last success before the
// kill to its first after, over the clients served on both sides.
func longestGap(ss []served) time.Duration {
	var worst time.Duration
	for i := range ss {
		before, after := ss[i].lastBeforeKill.Load(), ss[i].afterKill.Load()
		if before != 0 && after != 0 {
			worst = max(worst, time.Duration(after-before))
		}
	}
	return worst
}

// rateRecovered is the time from tick kill to the start of the first run
// of `run` ticks at or above share×rate (per second), counted from the tick
// after the kill's; -1 when there is none.
func rateRecovered(ticks []int64, kill int, rate, share float64, run int) time.Duration {
	perTick := rate * scaleTick.Seconds() * share
	for i := kill + 1; i+run <= len(ticks); i++ {
		ok := true
		for j := i; j < i+run; j++ {
			if float64(ticks[j]) < perTick {
				ok = false
				break
			}
		}
		if ok {
			return time.Duration(i-kill) * scaleTick
		}
	}
	return -1
}

// postFault adds a fault through the admin API.
func postFault(ctx context.Context, adminURL, body string) error {
	resp, err := httpDo(ctx, http.MethodPost, adminURL+"/v1/faults", strings.NewReader(body), http.StatusCreated)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// httpDo sends one request and returns its response if its status is
// want; otherwise it closes the body and names the status and the body's
// text in the error.
func httpDo(ctx context.Context, method, url string, body io.Reader, want int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		var b bytes.Buffer
		_, _ = b.ReadFrom(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(b.String()))
	}
	return resp, nil
}

// deleteFaults ends every fault (a killed node starts again).
func deleteFaults(ctx context.Context, adminURL string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, adminURL+"/v1/faults", nil)
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// countSockets is how many sockets this process holds open.
func countSockets() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}
