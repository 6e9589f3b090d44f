package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicksPerSecond is USER_HZ, which Linux fixes at 100 on every
// architecture Go supports; /proc/<pid>/stat counts CPU time in it.
const clockTicksPerSecond = 100

// processCPU returns user+system CPU time of pid (all its threads) so far.
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(raw)
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat
// line. The command name (field 2) is in parentheses and may hold spaces, so
// fields are counted after the last ')'.
func parseStatCPU(raw []byte) (time.Duration, error) {
	closing := bytes.LastIndexByte(raw, ')')
	if closing < 0 {
		return 0, fmt.Errorf("stat: no command field")
	}
	fields := strings.Fields(string(raw[closing+1:]))
	// After ')', field 3 (state) is index 0, so utime (14) is index 11.
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat: %d fields", len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat: bad utime/stime %q %q", fields[11], fields[12])
	}
	return time.Duration(utime+stime) * time.Second / clockTicksPerSecond, nil
}

// hostCPU is the machine's CPU time so far, summed over its CPUs
// (/proc/stat's cpu line): all of it (user to steal; guest time is in user
// already), the part the hypervisor gave to something else while the CPUs
// had work (steal), and the part no process wanted (idle and iowait).
type hostCPU struct{ total, steal, idle time.Duration }

func readHostCPU() (hostCPU, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}, err
	}
	return parseHostStat(raw)
}

// parseHostStat reads /proc/stat's first (all CPUs) line: "cpu user nice
// system idle iowait irq softirq steal guest guest_nice".
func parseHostStat(raw []byte) (hostCPU, error) {
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 9 || fields[0] != "cpu" {
		return hostCPU{}, fmt.Errorf("/proc/stat: no steal in %q", line)
	}
	var h hostCPU
	for i, f := range fields[1:9] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return hostCPU{}, fmt.Errorf("/proc/stat: %q", f)
		}
		d := time.Duration(ticks) * time.Second / clockTicksPerSecond
		h.total += d
		switch i {
		case 3, 4: // idle, iowait: a CPU with nothing runnable either way
			h.idle += d
		case 7:
			h.steal = d
		}
	}
	return h, nil
}

// stealShareSince is the share of the machine's CPU time since before
// that was stolen: 0 when none passed (or /proc/stat could not be read).
func (h hostCPU) stealShareSince(before hostCPU) float64 {
	return h.shareSince(before, h.steal-before.steal)
}

// idleShareSince is the share of the machine's CPU time since before in
// which a CPU had nothing to run: where a target leaves the machine idle
// under a fixed number of producers, its rate is bound by waiting (a disk,
// a round trip), not by CPU.
func (h hostCPU) idleShareSince(before hostCPU) float64 {
	return h.shareSince(before, h.idle-before.idle)
}

func (h hostCPU) shareSince(before hostCPU, part time.Duration) float64 {
	if h.total <= before.total || before.total == 0 {
		return 0
	}
	return float64(part) / float64(h.total-before.total)
}

// peakRSS returns VmHWM (the resident set's high-water mark) of pid in bytes.
func peakRSS(pid int) (int64, error) { return statusKB(pid, "VmHWM:") }

// statusKB returns the kB field key (with its colon, e.g. "VmRSS:") of
// pid's /proc/<pid>/status in bytes.
func statusKB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatusKB(f, key)
}

func parseVmHWM(f io.Reader) (int64, error) { return parseStatusKB(f, "VmHWM:") }

func parseStatusKB(f io.Reader, key string) (int64, error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, key); ok {
			fields := strings.Fields(rest) // "12345 kB"
			if len(fields) != 2 || fields[1] != "kB" {
				return 0, fmt.Errorf("status: odd %s line %q", strings.TrimSuffix(key, ":"), line)
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("status: %w", err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("status: no %s line", strings.TrimSuffix(key, ":"))
}
