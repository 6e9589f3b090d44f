package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// A txncoord process holds leaders, coordinators and (with several
// coordinators) an etcd member; /proc gives only their sum. With
// --cpu-profile the runner takes a CPU profile of each cell's window from
// the child's admin API and splits the window's CPU by component, in
// proportion to the profile's samples: the per-transaction costs a model of
// separate machines needs.

// CPU components, in report order.
const (
	compEtcdServer  = "etcd server"
	compEtcdClient  = "etcd client"
	compCoordinator = "coordinators"
	compLeader      = "leaders"
	compLog         = "log+bbolt"
	compWire        = "Kafka wire"
	compGC          = "GC"
	compOther       = "other"
)

var cpuComponents = []string{compEtcdServer, compEtcdClient, compCoordinator, compLeader, compLog, compWire, compGC, compOther}

// stackRule assigns a sample to a component.
type stackRule struct {
	component string
	match     *regexp.Regexp
}

// wholeStackRules win when any frame of a stack matches, in order: a
// goroutine serving etcd's gRPC is etcd's whatever it calls, and one inside
// the etcd client is the coordinator's cost of talking to etcd (its gRPC
// transport goroutines included), whoever called it.
var wholeStackRules = []stackRule{
	{compEtcdServer, regexp.MustCompile(`^go\.etcd\.io/etcd/server/|^go\.etcd\.io/raft/|^go\.etcd\.io/etcd/pkg/|` +
		`^google\.golang\.org/grpc\.\(\*Server\)|^google\.golang\.org/grpc/internal/transport\.(\(\*http2Server\)|NewServerTransport)|` +
		`^github\.com/soheilhy/cmux`)},
	{compEtcdClient, regexp.MustCompile(`^go\.etcd\.io/etcd/client/|` +
		`^google\.golang\.org/grpc/internal/transport\.(\(\*http2Client\)|NewHTTP2Client|\(\*ClientStream\))|` +
		`^google\.golang\.org/grpc\.(\(\*csAttempt\)|\(\*clientStream\)|\(\*ClientConn\)|invoke|newClientStream)`)},
}

// leafRules take the frame nearest the leaf that matches one of them: the
// code that spent the time (an allocation inside a leader's handler is the
// leader's, a socket write under the wire package the wire's).
var leafRules = []stackRule{
	{compCoordinator, regexp.MustCompile(`^github\.com/txncoord/txncoord/(coordinator|txnrouter|txnetcd|ownership|markersender|txnlog|txncore|txnrules)\.`)},
	{compLeader, regexp.MustCompile(`^github\.com/txncoord/txncoord/(leaderstub|topics|topicconfig|groups)\.`)},
	{compLog, regexp.MustCompile(`^github\.com/txncoord/txncoord/(storage|wal)\.|^go\.etcd\.io/bbolt`)},
	{compWire, regexp.MustCompile(`^github\.com/txncoord/txncoord/(wire|node|negotiation|cluster|security)\.|^github\.com/twmb/franz-go/`)},
	{compGC, regexp.MustCompile(`^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge|gcStart|forEachP|GC)$`)},
}

// classifyStack names the component of a sample's stack (leaf first).
func classifyStack(frames []string) string {
	for _, r := range wholeStackRules {
		for _, f := range frames {
			if r.match.MatchString(f) {
				return r.component
			}
		}
	}
	for _, f := range frames {
		for _, r := range leafRules {
			if r.match.MatchString(f) {
				return r.component
			}
		}
	}
	return compOther
}

// stackSample is one stack of `go tool pprof -traces` and its CPU time.
type stackSample struct {
	value  time.Duration
	frames []string // leaf first
}

const tracesSeparator = "-----------+-------------------------------------------------------"

// tracesLabel is a sample's label line: the key right-aligned in ten
// columns, a colon, two spaces.
var tracesLabel = regexp.MustCompile(`^ *\S+:  `)

// parseTraces reads `go tool pprof -traces` of a CPU profile: a header,
// then per stack a separator, optional label lines ("key:  values"), and
// the frames, the first prefixed by the stack's time ("  350ms   f").
func parseTraces(r io.Reader) ([]stackSample, error) {
	var out []stackSample
	var cur *stackSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == tracesSeparator {
			if cur != nil && len(cur.frames) > 0 {
				out = append(out, *cur)
			}
			cur = &stackSample{}
			continue
		}
		if cur == nil || strings.TrimSpace(line) == "" {
			continue // the header
		}
		value, frame, ok := strings.Cut(strings.TrimLeft(line, " "), "   ")
		switch {
		case tracesLabel.MatchString(line):
			// A label line ("  key:  values") before the frames.
		case strings.HasPrefix(line, strings.Repeat(" ", 13)):
			// A frame under the first one.
			if len(cur.frames) > 0 {
				cur.frames = append(cur.frames, strings.TrimSuffix(strings.TrimSpace(line), " (inline)"))
			}
		case ok && len(cur.frames) == 0:
			d, err := time.ParseDuration(value)
			if err != nil {
				return nil, fmt.Errorf("pprof traces: stack value %q: %w", value, err)
			}
			cur.value = d
			cur.frames = append(cur.frames, strings.TrimSuffix(strings.TrimSpace(frame), " (inline)"))
		default:
			return nil, fmt.Errorf("pprof traces: unexpected line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil && len(cur.frames) > 0 {
		out = append(out, *cur)
	}
	return out, nil
}

// cpuShares is each component's share (0..1) of the samples' time; nil
// when there is none.
func cpuShares(samples []stackSample) map[string]float64 {
	var total time.Duration
	by := map[string]time.Duration{}
	for _, s := range samples {
		by[classifyStack(s.frames)] += s.value
		total += s.value
	}
	if total <= 0 {
		return nil
	}
	shares := map[string]float64{}
	for c, v := range by {
		shares[c] = float64(v) / float64(total)
	}
	return shares
}

// windowProfile is one cell's CPU profile, taken from the child's admin
// API over the measured window. A nil *windowProfile does nothing.
type windowProfile struct {
	adminURL, path string
	workload       Workload
	done           chan error // the fetch's outcome; nil until start
}

// start begins the profile (the window is starting) in the background.
func (wp *windowProfile) start(ctx context.Context) {
	if wp == nil {
		return
	}
	wp.done = make(chan error, 1)
	if wp.workload.Duration <= 0 || wp.workload.Count > 0 {
		wp.done <- fmt.Errorf("a CPU profile needs a --duration window")
		return
	}
	go func() { wp.done <- fetchProfile(ctx, wp.adminURL, profileSeconds(wp.workload.Duration), wp.path) }()
}

// split waits for the profile (it ends about when the window does, so the
// child must not be stopped before) and splits cpu, the window's CPU, by
// component; or says why it cannot ("" and nil when nothing was profiled).
func (wp *windowProfile) split(ctx context.Context, res *Result, cpu time.Duration) (map[string]time.Duration, string) {
	if wp == nil || wp.done == nil {
		return nil, ""
	}
	if err := <-wp.done; err != nil {
		return nil, "profile: " + err.Error()
	}
	if res == nil || res.Committed == 0 {
		return nil, "profile: no transaction committed in the window"
	}
	shares, err := profileShares(ctx, wp.path)
	if err != nil {
		return nil, "profile: " + err.Error()
	}
	by := map[string]time.Duration{}
	for c, share := range shares {
		by[c] = time.Duration(share * float64(cpu))
	}
	return by, ""
}

// profileSeconds is how long a window's CPU profile runs: the window,
// whole seconds (pprof's unit), at least one.
func profileSeconds(window time.Duration) int {
	return max(1, int(window/time.Second))
}

// fetchProfile saves the CPU profile of seconds seconds from adminURL's
// /debug/pprof/profile into path.
func fetchProfile(ctx context.Context, adminURL string, seconds int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", adminURL, seconds)
	resp, err := httpDo(ctx, http.MethodGet, url, nil, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileShares runs `go tool pprof -traces` on the profile at path (the Go
// toolchain must be on PATH; the profile carries its symbols) and returns
// each component's share of its CPU samples.
func profileShares(ctx context.Context, path string) (map[string]float64, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go tool pprof -traces %s: %v: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	samples, err := parseTraces(&stdout)
	if err != nil {
		return nil, err
	}
	shares := cpuShares(samples)
	if shares == nil {
		return nil, fmt.Errorf("%s: no CPU samples", path)
	}
	return shares, nil
}
