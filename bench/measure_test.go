package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDataDriven replays testdata/*.txt: /proc parsing, the Prometheus
// scrape and the coordinator figures derived from it, and the partition
// layout.
func TestDataDriven(t *testing.T) {
	runDataDriven(t, "testdata/measurements.txt", func(t *testing.T, s scenario) string {
		switch s.command {
		case "stat-cpu":
			d, err := parseStatCPU([]byte(s.input))
			if err != nil {
				return "error: " + err.Error()
			}
			return "cpu " + d.String()
		case "vmhwm":
			n, err := parseVmHWM(strings.NewReader(s.input))
			if err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("peak %d bytes", n)
		case "coord-figures":
			// elapsed= the window, committed= transactions committed in it
			// (default 0); input: the metrics' deltas over the window.
			elapsed, err := time.ParseDuration(s.arg(t, "elapsed"))
			if err != nil {
				t.Fatal(err)
			}
			var committed int64
			if v, ok := s.args["committed"]; ok {
				if committed, err = strconv.ParseInt(v, 10, 64); err != nil {
					t.Fatal(err)
				}
			}
			m, err := parseMetrics(strings.NewReader(s.input))
			if err != nil {
				return "error: " + err.Error()
			}
			f := coordFigures(m, elapsed, committed)
			var b strings.Builder
			for _, l := range []struct {
				name   string
				v      float64
				format string
			}{
				{"group commits/s", f.GroupCommitsPerSec, "%.1f"},
				{"fdatasyncs/s", f.FdatasyncsPerSec, "%.1f"},
				{"fdatasyncs/group commit", f.FdatasyncsPerCommit, "%.4f"},
				{"extra fdatasyncs", f.ExtraFdatasyncs, "%.0f"},
				{"applier commits/s", f.ApplyCommitsPerSec, "%.1f"},
				{"records/group commit", f.RecordsPerCommit, "%.2f"},
				{"transitions/fsync", f.TransitionsPerFsync, "%.2f"},
				{"log B/txn", f.LogBytesPerTxn, "%.1f"},
				{"applier B/txn", f.ApplyBytesPerTxn, "%.1f"},
				{"written B/txn", f.BytesPerTxn, "%.1f"},
				{"markers/WTM request", f.MarkersPerWTMRequest, "%.2f"},
			} {
				fmt.Fprintf(&b, "%s %s\n", l.name, orNA(l.v, l.format))
			}
			for _, src := range f.Sources {
				b.WriteString("source " + src + "\n")
			}
			return b.String()
		case "groups":
			// input: one line per leader, "leader: partitions..."
			byLeader := map[int32][]int32{}
			for _, line := range strings.Split(s.input, "\n") {
				leader, parts, _ := strings.Cut(line, ":")
				id := atoi32(t, leader)
				for _, p := range strings.Fields(parts) {
					byLeader[id] = append(byLeader[id], atoi32(t, p))
				}
			}
			groups := assignGroups(byLeader, int(atoi32(t, s.arg(t, "producers"))), int(atoi32(t, s.arg(t, "per-txn"))))
			var b strings.Builder
			for i, g := range groups {
				fmt.Fprintf(&b, "producer %d: %v\n", i, g)
			}
			return b.String()
		default:
			t.Fatalf("%s: unknown command %q", s.pos, s.command)
			return ""
		}
	})
}

func atoi32(t *testing.T, s string) int32 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{4, 2}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{math.NaN(), 2}, 2}} {
		if got := medianKnown(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing must be NaN (printed n/a)")
	}
}
