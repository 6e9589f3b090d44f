package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
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

// A run handed out is not handed out again while reserved, in this
// process or another sharing the reservation directory; once the
// reservation is old it may be.
func TestRunReservesItsPorts(t *testing.T) {
	saved := reservationDir
	reservationDir = t.TempDir()
	t.Cleanup(func() { reservationDir = saved })
	base, err := Run(3)
	if err != nil {
		t.Fatal(err)
	}
	for p := base; p < base+3; p++ {
		if reserve(p, 1) {
			t.Fatalf("port %d of the run %d-%d reserved twice", p, base, base+2)
		}
	}
	if !reserve(base+3, 1) {
		t.Fatalf("port %d, after the run, refused", base+3)
	}
	old := time.Now().Add(-reservedFor - time.Second)
	for p := base; p < base+3; p++ {
		if err := os.Chtimes(filepath.Join(reservationDir, strconv.Itoa(p)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if !reserve(base, 3) {
		t.Fatalf("run %d-%d refused after its reservation expired", base, base+2)
	}
}
