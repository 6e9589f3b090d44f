package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Metrics is one scrape of a Prometheus text endpoint, summed over label
// sets: name → value. Histograms appear as name_sum / name_count / name_bucket.
type Metrics map[string]float64

// scrapeMetrics GETs url (txncoord's admin /metrics).
func scrapeMetrics(ctx context.Context, url string) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format: comment lines are skipped,
// every sample line is "name[{labels}] value [timestamp]". Label values may
// hold spaces, so the name ends at '{' or the first space and the value is
// read after the closing '}'.
func parseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("metrics: unclosed labels in %q", line)
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", line, err)
		}
		m[name] += v
	}
	return m, sc.Err()
}

// delta is after - before, per name present in after.
func (after Metrics) delta(before Metrics) Metrics {
	d := Metrics{}
	for name, v := range after {
		d[name] = v - before[name]
	}
	return d
}

// The process store's counters (storage/doc.go: one write-ahead log per
// process in front of bbolt; exported by node/store.go), and the older
// transaction-log counters. Named exactly: a loose match would count
// txncoord_txnlog_fsyncs_total, which now counts the same group commits as
// txncoord_store_group_commits_total, twice.
const (
	metricGroupCommits  = "txncoord_store_group_commits_total"   // log group commits
	metricFdatasyncs    = "txncoord_store_fdatasync_calls_total" // the log's fdatasync calls
	metricLogBytes      = "txncoord_store_log_bytes_total"       // bytes written to the log
	metricApplyCommits  = "txncoord_store_apply_commits_total"   // the applier's bbolt commits
	metricApplyPages    = "txncoord_store_apply_pages_total"     // 4 KiB pages the applier wrote
	metricCommitRecords = "txncoord_store_commit_ops"            // histogram: records per group commit
	// Before the store counters, the coordinator's bbolt commits; now the
	// process log's group commits again. The fallback for older binaries only.
	metricTxnlogFsyncs  = "txncoord_txnlog_fsyncs_total"
	metricTransitions   = "txncoord_txnlog_transitions_total"
	metricMarkersPerWTM = "txncoord_markers_per_request" // histogram
)

const (
	// applyPageBytes is what one txncoord_store_apply_pages_total counts.
	applyPageBytes = 4096
	// walSegmentBytes is the log's segment size (wal's default, which
	// txncoord up uses): starting a segment adds one fdatasync.
	walSegmentBytes = 64 << 20
)

// CoordFigures are txncoord's storage figures over a window, from the
// metrics above. NaN means the binary exports nothing to derive the figure
// from (printed "n/a").
type CoordFigures struct {
	GroupCommitsPerSec float64 // the log's group commits: the durable write a transition waits for
	FdatasyncsPerSec   float64 // the log's fdatasync calls
	// FdatasyncsPerCommit is fdatasyncs / group commits; ExtraFdatasyncs
	// is how many fdatasyncs the window had beyond one per group commit,
	// one per log segment it may have started (ceil(log bytes / 64 MiB))
	// and one in flight (the log counts an fdatasync before it returns,
	// the group commit after, and a scrape reads both apart): above 0, the
	// goal "one fdatasync per commit" is missed.
	FdatasyncsPerCommit float64
	ExtraFdatasyncs     float64
	ApplyCommitsPerSec  float64 // the applier's bbolt commits (two fdatasyncs each, not in the log's count)
	RecordsPerCommit    float64 // records of every component per group commit
	TransitionsPerFsync float64 // coordinator state transitions per group commit
	// Bytes written per committed transaction: to the log, by the applier
	// (4 KiB per bbolt page), and their sum.
	LogBytesPerTxn       float64
	ApplyBytesPerTxn     float64
	BytesPerTxn          float64
	MarkersPerWTMRequest float64
	Sources              []string // which metric names each figure came from
}

// values are the figures' fields, for taking medians over rounds.
func (f *CoordFigures) values() []*float64 {
	return []*float64{&f.GroupCommitsPerSec, &f.FdatasyncsPerSec, &f.FdatasyncsPerCommit, &f.ExtraFdatasyncs,
		&f.ApplyCommitsPerSec, &f.RecordsPerCommit, &f.TransitionsPerFsync,
		&f.LogBytesPerTxn, &f.ApplyBytesPerTxn, &f.BytesPerTxn, &f.MarkersPerWTMRequest}
}

// medianFigures is the median of each figure over figs (the rounds), NaN
// where no round has it; nil without rounds.
func medianFigures(figs []CoordFigures) *CoordFigures {
	if len(figs) == 0 {
		return nil
	}
	out := &CoordFigures{}
	for i, dst := range out.values() {
		xs := make([]float64, len(figs))
		for j := range figs {
			xs[j] = *figs[j].values()[i]
		}
		*dst = medianKnown(xs)
	}
	for _, f := range figs {
		for _, s := range f.Sources {
			if !slices.Contains(out.Sources, s) {
				out.Sources = append(out.Sources, s)
			}
		}
	}
	return out
}

// coordFigures derives CoordFigures from the counters' change over a window
// of elapsed in which committed transactions committed.
func coordFigures(d Metrics, elapsed time.Duration, committed int64) CoordFigures {
	nan := math.NaN()
	f := CoordFigures{GroupCommitsPerSec: nan, FdatasyncsPerSec: nan, FdatasyncsPerCommit: nan, ExtraFdatasyncs: nan,
		ApplyCommitsPerSec: nan, RecordsPerCommit: nan, TransitionsPerFsync: nan,
		LogBytesPerTxn: nan, ApplyBytesPerTxn: nan, BytesPerTxn: nan, MarkersPerWTMRequest: nan}
	perSec, perTxn := rates(elapsed, committed)
	src := func(figure, from string, v float64) {
		if !math.IsNaN(v) {
			f.Sources = append(f.Sources, figure+": "+from)
		}
	}

	commits, commitsName, haveCommits := first(d, metricGroupCommits, metricTxnlogFsyncs)
	if haveCommits {
		f.GroupCommitsPerSec = perSec(commits)
		src("group commits/s", commitsName, f.GroupCommitsPerSec)
	}
	fdatasyncs, haveFdatasyncs := d[metricFdatasyncs]
	logBytes, haveLogBytes := d[metricLogBytes]
	if haveFdatasyncs {
		f.FdatasyncsPerSec = perSec(fdatasyncs)
		src("fdatasyncs/s", metricFdatasyncs, f.FdatasyncsPerSec)
		if haveCommits && commits > 0 {
			f.FdatasyncsPerCommit = fdatasyncs / commits
			segments := 0.0
			if haveLogBytes && logBytes > 0 {
				segments = math.Ceil(logBytes / walSegmentBytes)
			}
			f.ExtraFdatasyncs = max(0, fdatasyncs-commits-segments-1)
		}
	}
	if v, ok := d[metricApplyCommits]; ok {
		f.ApplyCommitsPerSec = perSec(v)
		src("applier commits/s", metricApplyCommits, f.ApplyCommitsPerSec)
	}
	if mean, ok := histogramMean(d, metricCommitRecords); ok {
		f.RecordsPerCommit = mean
		src("records/group commit", "mean of "+metricCommitRecords, mean)
	}
	if v, ok := d[metricTransitions]; ok && haveCommits && commits > 0 {
		f.TransitionsPerFsync = v / commits
		src("transitions/fsync", metricTransitions+" / "+commitsName, f.TransitionsPerFsync)
	}

	pages, havePages := d[metricApplyPages]
	if haveLogBytes {
		f.LogBytesPerTxn = perTxn(logBytes)
	}
	if havePages {
		f.ApplyBytesPerTxn = perTxn(applyPageBytes * pages)
	}
	if haveLogBytes && havePages {
		f.BytesPerTxn = f.LogBytesPerTxn + f.ApplyBytesPerTxn
		src("bytes/txn", "("+metricLogBytes+" + 4096 × "+metricApplyPages+") / committed transactions", f.BytesPerTxn)
	}

	if mean, ok := histogramMean(d, metricMarkersPerWTM); ok {
		f.MarkersPerWTMRequest = mean
		src("markers/WTM request", "mean of "+metricMarkersPerWTM, mean)
	}
	return f
}

// first is the value of the first of names present in d, and its name.
func first(d Metrics, names ...string) (float64, string, bool) {
	for _, n := range names {
		if v, ok := d[n]; ok {
			return v, n, true
		}
	}
	return 0, "", false
}

// histogramMean is name_sum / name_count, if the histogram observed anything.
func histogramMean(d Metrics, name string) (float64, bool) {
	count := d[name+"_count"]
	if count <= 0 {
		return 0, false
	}
	return d[name+"_sum"] / count, true
}

// rates returns the per-second and per-committed-transaction figures of a
// window (NaN when the window or the count is empty).
func rates(elapsed time.Duration, committed int64) (perSec, perTxn func(float64) float64) {
	secs := elapsed.Seconds()
	perSec = func(v float64) float64 {
		if secs <= 0 {
			return math.NaN()
		}
		return v / secs
	}
	perTxn = func(v float64) float64 {
		if committed <= 0 {
			return math.NaN()
		}
		return v / float64(committed)
	}
	return perSec, perTxn
}
