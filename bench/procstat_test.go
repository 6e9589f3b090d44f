package bench

import (
	"testing"
	"time"
)

func TestParseStatSteal(t *testing.T) {
	raw := []byte("cpu  4705 150 1120 16250 520 0 34 1234 0 0\ncpu0 2352 75 560 8125 260 0 17 617 0 0\nintr 1 2\n")
	h, err := parseHostStat(raw)
	if got := h.steal; err != nil || got != 12340*time.Millisecond {
		t.Fatalf("steal = %v, %v; want 12.34s (1234 ticks, all CPUs)", got, err)
	}
	if h.total != 240130*time.Millisecond {
		t.Fatalf("total = %v, want 240.13s (user to steal)", h.total)
	}
	if h.idle != 167700*time.Millisecond {
		t.Fatalf("idle = %v, want 167.7s (idle + iowait)", h.idle)
	}
	later := hostCPU{total: h.total + 10*time.Second, steal: h.steal + 2*time.Second, idle: h.idle + 5*time.Second}
	if share := later.stealShareSince(h); share != 0.2 {
		t.Fatalf("steal share = %v, want 0.2", share)
	}
	if share := later.idleShareSince(h); share != 0.5 {
		t.Fatalf("idle share = %v, want 0.5", share)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 4 5 6 7\n", "cpu 1 2 3 4 5 6 7 x\n"} {
		if _, err := parseHostStat([]byte(bad)); err == nil {
			t.Errorf("parseHostStat(%q) = nil error", bad)
		}
	}
}
