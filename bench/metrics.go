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

// CoordFigures are the coordinator-side figures of issue 9 §3, derived from
// whichever txncoord_ metrics the binary exports. NaN means the binary
// exports nothing to derive it from (printed "n/a").
type CoordFigures struct {
	FsyncsPerSec         float64
	TransitionsPerFsync  float64
	MarkersPerWTMRequest float64
	Sources              []string // which metric names each figure came from
}

// coordFigures derives CoordFigures from the counters' change over a window.
// The names are matched loosely on purpose: the coordinator's metrics are
// being written at the same time as this bench, and the report names the
// source of every figure so a reader can check it.
func coordFigures(d Metrics, elapsed time.Duration) CoordFigures {
	f := CoordFigures{FsyncsPerSec: math.NaN(), TransitionsPerFsync: math.NaN(), MarkersPerWTMRequest: math.NaN()}
	names := make([]string, 0, len(d))
	for name := range d {
		if strings.HasPrefix(name, "txncoord_") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	sum := func(match func(string) bool) (total float64, used []string) {
		for _, n := range names {
			if match(n) {
				total += d[n]
				used = append(used, n)
			}
		}
		return total, used
	}

	fsyncs, fsyncSrc := sum(func(n string) bool {
		return strings.Contains(n, "fsync") && strings.HasSuffix(n, "_total")
	})
	if len(fsyncSrc) == 0 {
		// bbolt commits: each is one durable write (two fdatasyncs inside).
		fsyncs, fsyncSrc = sum(func(n string) bool { return strings.HasSuffix(n, "commits_total") })
	}
	if len(fsyncSrc) > 0 && elapsed > 0 {
		f.FsyncsPerSec = fsyncs / elapsed.Seconds()
		f.Sources = append(f.Sources, "fsyncs/s: "+strings.Join(fsyncSrc, "+"))
	}

	transitions, trSrc := sum(func(n string) bool {
		return strings.Contains(n, "transition") && strings.HasSuffix(n, "_total")
	})
	if len(trSrc) > 0 && fsyncs > 0 {
		f.TransitionsPerFsync = transitions / fsyncs
		f.Sources = append(f.Sources, "transitions/fsync: "+strings.Join(trSrc, "+")+" / fsyncs")
	} else if mean, src, ok := histogramMean(d, names, "per_fsync", "per_commit", "per_sync", "commit_ops", "batch_size"); ok {
		f.TransitionsPerFsync = mean
		f.Sources = append(f.Sources, "transitions/fsync: mean of "+src)
	}

	if mean, src, ok := histogramMean(d, names, "markers_per_request"); ok {
		f.MarkersPerWTMRequest = mean
		f.Sources = append(f.Sources, "markers/WTM request: mean of "+src)
	}
	return f
}

// histogramMean is sum/count over every histogram whose name contains one of
// the substrings, with the names it used.
func histogramMean(d Metrics, names []string, substrings ...string) (float64, string, bool) {
	var sum, count float64
	var used []string
	for _, n := range names {
		base, ok := strings.CutSuffix(n, "_sum")
		if !ok {
			continue
		}
		if !slices.ContainsFunc(substrings, func(s string) bool { return strings.Contains(base, s) }) {
			continue
		}
		c, ok := d[base+"_count"]
		if !ok {
			continue
		}
		sum += d[n]
		count += c
		used = append(used, base)
	}
	if count <= 0 {
		return 0, "", false
	}
	return sum / count, strings.Join(used, "+"), true
}
