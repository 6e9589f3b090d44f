package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestRunIsBindable(t *testing.T) {
	base, err := Run(4)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
		if err != nil {
			t.Fatalf("port %d of the run: %v", base+i, err)
		}
		defer l.Close()
	}
}

// Runs are drawn below the ephemeral range, where no 127.0.0.1:0 listener
// of a test running in parallel can land.
func TestRunAvoidsEphemeralRange(t *testing.T) {
	start := ephemeralStart()
	for range 20 {
		base, err := Run(4)
		if err != nil {
			t.Fatal(err)
		}
		if base+3 >= start {
			t.Fatalf("run %d-%d reaches the ephemeral range (from %d)", base, base+3, start)
		}
	}
}
