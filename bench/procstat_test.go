package bench

import (
	"testing"
	"time"
)

func TestParseStatSteal(t *testing.T) {
	raw := []byte("cpu  4705 150 1120 16250 520 0 34 1234 0 0\ncpu0 2352 75 560 8125 260 0 17 617 0 0\nintr 1 2\n")
	got, err := parseStatSteal(raw)
	if err != nil || got != 12340*time.Millisecond {
		t.Fatalf("steal = %v, %v; want 12.34s (1234 ticks, all CPUs)", got, err)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 4 5 6 7\n", "cpu 1 2 3 4 5 6 7 x\n"} {
		if _, err := parseStatSteal([]byte(bad)); err == nil {
			t.Errorf("parseStatSteal(%q) = nil error", bad)
		}
	}
}
