package bench

import (
	"os"
	"sort"
	"syscall"
	"time"
)

// FsyncProbe is this disk's fdatasync rate, measured before the runs so the
// coordinator's fsyncs per second can be read against the physical limit.
type FsyncProbe struct {
	Dir       string
	Syncs     int
	P50, P99  time.Duration
	PerSecond float64
}

// fsyncBlocks is how many 4 KiB blocks the probe cycles over: after the first
// pass it overwrites in place, as a B+tree's page writes mostly do.
const fsyncBlocks = 256

// MeasureFsync writes 4 KiB and fdatasyncs it, in a temporary file in dir
// (the data directories' filesystem), over and over for d.
func MeasureFsync(dir string, d time.Duration) (FsyncProbe, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-*")
	if err != nil {
		return FsyncProbe{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	var lat []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < d; i++ {
		block[0] = byte(i)
		t := time.Now()
		if _, err := f.WriteAt(block, int64(i%fsyncBlocks)*int64(len(block))); err != nil {
			return FsyncProbe{}, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return FsyncProbe{}, err
		}
		lat = append(lat, time.Since(t))
	}
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return FsyncProbe{Dir: dir, Syncs: len(lat), P50: quantile(lat, 0.5), P99: quantile(lat, 0.99),
		PerSecond: float64(len(lat)) / elapsed.Seconds()}, nil
}

// quantile of sorted durations; 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
