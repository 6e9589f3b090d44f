package eos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
)

// EventKind is what a scheduled event does.
type EventKind int

const (
	// KillMember SIGKILLs a stage's member slot and starts it again.
	KillMember EventKind = iota
	// LeaveMember stops a member gracefully (SIGTERM: it aborts its open
	// transaction and leaves the group), and starts it again Pause later:
	// two rebalances. The chain goes on meanwhile, so the events after
	// it still land at their own progress.
	LeaveMember
	// AddMember starts one more member slot in a stage (a join).
	AddMember
	// Func runs Do (a fault of the cluster, e.g. a coordinator bounce).
	Func
)

// Event is something done to the running chain once the fraction At of the
// input values is committed in the output.
type Event struct {
	At    float64
	Kind  EventKind
	Stage int // 1..Stages (member events)
	Slot  int // member events but AddMember
	Pause time.Duration
	Name  string // Func: how the report names it
	Do    func(ctx context.Context) error
}

func (e Event) String() string {
	switch e.Kind {
	case KillMember:
		return fmt.Sprintf("SIGKILL s%d.m%d", e.Stage, e.Slot)
	case LeaveMember:
		return fmt.Sprintf("leave+rejoin s%d.m%d", e.Stage, e.Slot)
	case AddMember:
		return fmt.Sprintf("join s%d", e.Stage)
	default:
		return e.Name
	}
}

// Config is one chain run.
type Config struct {
	Bootstrap  []string
	Client     string // kgo, sarama, confluent
	Values     int
	Partitions int32
	// Topics are the input, the middle topics and the output: stage i
	// reads Topics[i-1] and writes Topics[i], so there is one stage
	// fewer than topics (at least three: two stages). They must exist
	// with Partitions partitions each.
	Topics []string
	// Groups are the stages' consumer groups (default Topics[i-1] +
	// "-g" + i for stage i).
	Groups []string
	// Members per stage at the start (default 3).
	Members   int
	MemberBin string // the eosmember binary
	// MemberArgs go before the member flags (e.g. a script for node):
	// any program that takes eosmember's flags and writes the same
	// history can be a member.
	MemberArgs []string
	Dir        string // histories and member logs
	AbortP     float64
	BatchMax   int
	// Pause is each member's sleep after a transaction (see
	// MemberConfig.Pause).
	Pause  time.Duration
	Events []Event
	// AfterStop runs once every member has stopped, before the final
	// reads (e.g. one more coordinator bounce: offsets must survive it).
	AfterStop func(ctx context.Context) error
	// Settle bounds the wait, once every value is in the output through a
	// committed or unknown-outcome transaction, for the unknown ones to be
	// redone (default 20 s).
	Settle time.Duration
	Seed   int64
	Logf   func(format string, args ...any)
}

func (c *Config) defaults() error {
	if c.Values <= 0 || c.Partitions <= 0 || c.MemberBin == "" || c.Dir == "" || len(c.Bootstrap) == 0 || c.Client == "" {
		return errors.New("eos: chain needs values, partitions, member binary, dir, bootstrap and client")
	}
	if len(c.Topics) < 3 {
		return errors.New("eos: chain needs at least three topics (two stages)")
	}
	for _, t := range c.Topics {
		if t == "" {
			return errors.New("eos: chain needs every topic named")
		}
	}
	if len(c.Groups) == 0 {
		for i := range c.Stages() {
			c.Groups = append(c.Groups, fmt.Sprintf("%s-g%d", c.Topics[i], i+1))
		}
	}
	if len(c.Groups) != c.Stages() {
		return fmt.Errorf("eos: %d groups for %d stages", len(c.Groups), c.Stages())
	}
	if c.Members <= 0 {
		c.Members = 3
	}
	if c.Settle <= 0 {
		c.Settle = 20 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Stages is the number of stages: one fewer than the topics.
func (c *Config) Stages() int { return len(c.Topics) - 1 }

// Chain is a running chain.
type Chain struct {
	cfg      Config
	mu       sync.Mutex
	slots    [][]*slot // by stage - 1
	stopping bool
	crashes  int
}

// Run writes the input, runs every stage until every value is committed in
// the output (or ctx ends), stops the members, reads back and checks. The
// report is returned whenever the check could run, also with an error
// (e.g. the chain never finished: the report then shows the losses).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	inputAt, err := produceInput(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cfg.Logf("eos: %d input values written in %v", cfg.Values, time.Since(start).Round(time.Millisecond))
	c := &Chain{cfg: cfg, slots: make([][]*slot, cfg.Stages())}
	for stage := 1; stage <= cfg.Stages(); stage++ {
		for i := 0; i < cfg.Members; i++ {
			c.addSlot(stage)
		}
	}
	var notes []string
	runErr := c.wait(ctx, start, &notes)
	c.stopAll()
	cfg.Logf("eos: members stopped at %v", time.Since(start).Round(time.Millisecond))
	if cfg.AfterStop != nil {
		if err := cfg.AfterStop(ctx); err != nil {
			return nil, fmt.Errorf("eos: after stop: %w", err)
		}
		notes = append(notes, "the after-stop step ran before the final reads and offset fetches")
	}
	in := Input{Values: cfg.Values, Topics: cfg.Topics, InputAt: inputAt, Offsets: make([]Offsets, cfg.Stages())}
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
	defer cancel()
	var parts []checker.Partition
	for _, t := range cfg.Topics[1:] {
		for p := int32(0); p < cfg.Partitions; p++ {
			parts = append(parts, checker.Partition{Topic: t, Partition: p})
		}
	}
	reads, err := workload.ReadCommitted(readCtx, cfg.Bootstrap, parts)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	in.Middle, in.Output = checker.Reads{}, checker.Reads{}
	for p, recs := range reads {
		if p.Topic == cfg.Topics[cfg.Stages()] {
			in.Output[p] = recs
		} else {
			in.Middle[p] = recs
		}
	}
	for i := range cfg.Stages() {
		if in.Offsets[i], err = groupOffsets(readCtx, cfg, cfg.Groups[i], cfg.Topics[i]); err != nil {
			return nil, errors.Join(runErr, err)
		}
	}
	if in.History, err = ReadHistory(cfg.Dir); err != nil {
		return nil, errors.Join(runErr, err)
	}
	rep, err := Check(in)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	rep.Notes = append(notes, fmt.Sprintf("%s, %d members per stage, %d partitions, duration %v", cfg.Client, cfg.Members, cfg.Partitions, time.Since(start).Round(time.Millisecond)))
	c.mu.Lock()
	crashes := c.crashes
	c.mu.Unlock()
	if crashes > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d member exits not asked for (restarted)", crashes))
	}
	return rep, runErr
}

// produceInput writes InputValue(i) to partition i mod Partitions, without
// a transaction and uncompressed (KafkaJS reads no snappy), and returns
// where each landed.
func produceInput(ctx context.Context, cfg Config) (map[int32]map[int64]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Bootstrap...), kgo.ClientID("eos-input"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(cfg.Topics[0]),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	at := map[int32]map[int64]string{}
	const batch = 500
	for lo := 0; lo < cfg.Values; lo += batch {
		var recs []*kgo.Record
		for i := lo; i < min(lo+batch, cfg.Values); i++ {
			recs = append(recs, &kgo.Record{Partition: int32(i) % cfg.Partitions, Value: []byte(InputValue(i))})
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			return nil, fmt.Errorf("eos: input: %w", err)
		}
		for _, r := range res {
			if at[r.Record.Partition] == nil {
				at[r.Record.Partition] = map[int64]string{}
			}
			at[r.Record.Partition][r.Record.Offset] = string(r.Record.Value)
		}
	}
	return at, nil
}

func groupOffsets(ctx context.Context, cfg Config, group, topic string) (Offsets, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Bootstrap...), kgo.ClientID("eos-offsets"))
	if err != nil {
		return Offsets{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	o := Offsets{Group: group, Committed: map[int32]int64{}, End: map[int32]int64{}}
	var lastErr error
	for ctx.Err() == nil {
		lastErr = nil
		// Stable: the last transaction's offsets stay pending until
		// its marker reaches the group's coordinator, after its commit
		// returned.
		fetched, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err == nil {
			err = fetched.Error()
		}
		var ends kadm.ListedOffsets
		if err == nil {
			ends, err = adm.ListEndOffsets(ctx, topic)
		}
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			fetched.Each(func(r kadm.OffsetResponse) {
				if r.Topic == topic && r.At >= 0 {
					o.Committed[r.Partition] = r.At
				}
			})
			ends.Each(func(l kadm.ListedOffset) { o.End[l.Partition] = l.Offset })
			return o, nil
		}
		lastErr = err
		time.Sleep(200 * time.Millisecond)
	}
	return o, fmt.Errorf("eos: offsets of group %s: %w (%v)", group, ctx.Err(), lastErr)
}

// wait runs the events by progress until every value is committed in the
// output.
func (c *Chain) wait(ctx context.Context, start time.Time, notes *[]string) error {
	p := newProgress(c.cfg.Dir, c.cfg.Values, c.cfg.Stages())
	events := append([]Event(nil), c.cfg.Events...)
	var coveredAt time.Time
	for {
		p.scan()
		committed, covered := p.fractions()
		for len(events) > 0 && committed >= events[0].At {
			e := events[0]
			events = events[1:]
			t := time.Now()
			if err := c.run(ctx, e); err != nil {
				return fmt.Errorf("eos: event %s: %w", e, err)
			}
			note := fmt.Sprintf("%s at %.0f%% committed (%v into the run, took %v)", e, 100*committed, t.Sub(start).Round(time.Millisecond), time.Since(t).Round(time.Millisecond))
			*notes = append(*notes, note)
			c.cfg.Logf("eos: %s", note)
		}
		switch {
		case committed >= 1 && len(events) == 0:
			return nil
		case covered >= 1 && len(events) == 0 && coveredAt.IsZero():
			coveredAt = time.Now()
		case !coveredAt.IsZero() && time.Since(coveredAt) > c.cfg.Settle:
			*notes = append(*notes, fmt.Sprintf("stopped %v after every value was in committed or unknown-outcome output", c.cfg.Settle))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("eos: chain did not finish (%.1f%% committed in the output, events left %d): %w", 100*committed, len(events), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Chain) run(ctx context.Context, e Event) error {
	switch e.Kind {
	case AddMember:
		c.addSlot(e.Stage)
		return nil
	case Func:
		return e.Do(ctx)
	}
	c.mu.Lock()
	if e.Stage < 1 || e.Stage > len(c.slots) || e.Slot < 0 || e.Slot >= len(c.slots[e.Stage-1]) {
		c.mu.Unlock()
		return fmt.Errorf("no member slot s%d.m%d", e.Stage, e.Slot)
	}
	s := c.slots[e.Stage-1][e.Slot]
	c.mu.Unlock()
	if e.Kind == KillMember {
		s.stop(syscall.SIGKILL)
		return s.start()
	}
	s.stop(syscall.SIGTERM)
	go func() {
		time.Sleep(e.Pause)
		if err := s.startUnlessStopping(); err != nil {
			c.cfg.Logf("eos: start %s again: %v", s.name(), err)
		}
	}()
	return nil
}

func (c *Chain) addSlot(stage int) {
	c.mu.Lock()
	s := &slot{c: c, stage: stage, idx: len(c.slots[stage-1])}
	c.slots[stage-1] = append(c.slots[stage-1], s)
	c.mu.Unlock()
	if err := s.start(); err != nil {
		c.cfg.Logf("eos: start %s: %v", s.name(), err)
	}
}

// stopAll stops every member gracefully, in parallel, and kills those
// that do not exit in time.
func (c *Chain) stopAll() {
	c.mu.Lock()
	c.stopping = true
	var all []*slot
	for _, ss := range c.slots {
		all = append(all, ss...)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stop(syscall.SIGTERM)
		}()
	}
	wg.Wait()
}

// slot is one member position of a stage; each start is a new
// incarnation (process) with the same transactional id.
type slot struct {
	c          *Chain
	stage, idx int
	mu         sync.Mutex
	inc        int
	cmd        *exec.Cmd
	done       chan struct{}
	expected   bool // the running process's exit was asked for
}

func (s *slot) name() string { return fmt.Sprintf("s%d.m%d.i%d", s.stage, s.idx, s.inc) }

func (s *slot) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked()
}

// startUnlessStopping starts the slot again unless every member is being
// stopped: checked under the slot's lock, so a stopAll that comes after
// sees the new process and stops it.
func (s *slot) startUnlessStopping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.mu.Lock()
	stopping := s.c.stopping
	s.c.mu.Unlock()
	if stopping {
		return nil
	}
	return s.startLocked()
}

func (s *slot) startLocked() error {
	if s.cmd != nil {
		s.inc++
	}
	cfg := s.c.cfg
	name := s.name()
	from, to := cfg.Topics[s.stage-1], cfg.Topics[s.stage]
	logf, err := os.OpenFile(filepath.Join(cfg.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	batch := cfg.BatchMax
	if batch <= 0 {
		batch = 50
	}
	args := append(append([]string(nil), cfg.MemberArgs...),
		"-client", cfg.Client, "-bootstrap", strings.Join(cfg.Bootstrap, ","),
		"-stage", fmt.Sprint(s.stage), "-group", cfg.Groups[s.stage-1], "-from", from, "-to", to,
		"-name", name, "-txn-id", fmt.Sprintf("eos-%s-%s-s%d.m%d", cfg.Client, cfg.Topics[0], s.stage, s.idx),
		"-history", HistoryPath(cfg.Dir, name), "-abort-p", fmt.Sprint(cfg.AbortP),
		"-seed", fmt.Sprint(cfg.Seed*1000+int64(s.stage*100+s.idx*10+s.inc)), "-batch", fmt.Sprint(batch), "-pause", cfg.Pause.String())
	cmd := exec.Command(cfg.MemberBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.cmd, s.done, s.expected = cmd, done, false
	go func() {
		cmd.Wait()
		close(done)
		s.exited(cmd, name)
	}()
	return nil
}

// exited restarts a member whose exit nobody asked for (it gave up after
// an error, as an application would be restarted by its supervisor).
func (s *slot) exited(cmd *exec.Cmd, name string) {
	if !s.unasked(cmd, true) {
		return
	}
	s.c.cfg.Logf("eos: member %s exited by itself (%s): restarting; log: %s", name, cmd.ProcessState, lastLines(filepath.Join(s.c.cfg.Dir, name+".log"), 3))
	time.Sleep(time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Checked again under the slot's lock, with the start: a stop that
	// came meanwhile marked the exit as expected, and a stop after this
	// sees the new process.
	if s.unaskedLocked(cmd, false) {
		if err := s.startLocked(); err != nil {
			s.c.cfg.Logf("eos: restart %s: %v", name, err)
		}
	}
}

func (s *slot) unasked(cmd *exec.Cmd, count bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unaskedLocked(cmd, count)
}

func (s *slot) unaskedLocked(cmd *exec.Cmd, count bool) bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	unasked := s.cmd == cmd && !s.expected && !s.c.stopping
	if unasked && count {
		s.c.crashes++
	}
	return unasked
}

// stop signals the running process and waits for it to exit (a graceful
// stop gets 30 s, then SIGKILL).
func (s *slot) stop(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done, name := s.cmd, s.done, s.name()
	s.expected = true
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.c.cfg.Logf("eos: member %s did not stop within 30 s of %v; killing it", name, sig)
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

func lastLines(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// progress follows the last stage's histories as they grow: which input
// values are in the output through committed (or unknown-outcome)
// transactions.
type progress struct {
	dir       string
	last      int // the last stage
	values    int
	offsets   map[string]int64
	pending   map[string][]int // stage-2 txn id → input values
	committed map[int]bool
	unknown   map[int]bool
}

func newProgress(dir string, values, last int) *progress {
	return &progress{dir: dir, last: last, values: values, offsets: map[string]int64{}, pending: map[string][]int{},
		committed: map[int]bool{}, unknown: map[int]bool{}}
}

// scan reads the complete lines appended since the last scan.
func (p *progress) scan() {
	paths, _ := filepath.Glob(filepath.Join(p.dir, fmt.Sprintf("hist-s%d.*.jsonl", p.last)))
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		f.Seek(p.offsets[path], 0)
		r := bufio.NewReaderSize(f, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil { // a partial line is read again next time
				break
			}
			p.offsets[path] += int64(len(line))
			if !bytes.Contains(line, []byte(`"ev":"txn"`)) && !bytes.Contains(line, []byte(`"ev":"end"`)) && !bytes.Contains(line, []byte(`"ev":"commit"`)) {
				continue
			}
			var e Line
			if json.Unmarshal(line, &e) != nil {
				continue
			}
			switch e.Ev {
			case "txn":
				for _, c := range e.In {
					if n, ok := parseInput(strings.SplitN(c.V, sep, 2)[0]); ok {
						p.pending[e.ID] = append(p.pending[e.ID], n)
					}
				}
			case "commit":
				for _, n := range p.pending[e.ID] {
					p.unknown[n] = true
				}
			case "end":
				if e.Outcome == "committed" {
					for _, n := range p.pending[e.ID] {
						p.committed[n] = true
					}
				}
				delete(p.pending, e.ID)
			}
		}
		f.Close()
	}
}

// fractions are the share of input values committed in the output, and
// the share committed or possibly committed.
func (p *progress) fractions() (committed, covered float64) {
	n := len(p.committed)
	for v := range p.unknown {
		if !p.committed[v] {
			n++
		}
	}
	return float64(len(p.committed)) / float64(p.values), float64(n) / float64(p.values)
}
