// Package freeport finds runs of free TCP ports on 127.0.0.1, for starting
// `txncoord up` (which puts leader i on port+i) in tests, the benchmark and
// the interop script.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Run returns a port P such that 127.0.0.1:P .. P+n-1 could all be bound a
// moment ago. The ports are released before it returns, so another process
// may take one before the caller binds it. To make that unlikely, P is
// drawn at random below the kernel's ephemeral range (which every
// 127.0.0.1:0 listener and outgoing connection of the tests running in
// parallel draws from: a run taken from that range collided with them),
// and the run is reserved (reserve): neither this process nor another
// test process of the machine is handed it again while its caller starts
// the process that binds it. If no run is free there, the kernel picks P,
// as before.
func Run(n int) (int, error) {
	low, high := 10000, ephemeralStart()-n
	for range 200 {
		if high <= low {
			break
		}
		if base := low + rand.IntN(high-low); bindable(base, n) && reserve(base, n) {
			return base, nil
		}
	}
	for range 50 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := first.Addr().(*net.TCPAddr).Port
		first.Close()
		if base+n-1 <= 65535 && bindable(base, n) {
			return base, nil
		}
	}
	return 0, errors.New("freeport: no run of free consecutive ports found")
}

// bindable reports whether base .. base+n-1 can all be bound now.
func bindable(base, n int) bool {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
		if err != nil {
			return false
		}
		held = append(held, l)
	}
	return true
}

// ephemeralStart is the first port of Linux's ephemeral range (32768 when
// it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	p, err := strconv.Atoi(fields[0])
	if err != nil || p <= 1024 {
		return 32768
	}
	return p
}

// reservedFor is how long a port handed out stays reserved: longer than a
// test takes from picking its ports to binding them, restarts on the same
// port included (a cluster of several processes picks every port first).
const reservedFor = 15 * time.Minute

// reservationDir holds one file per reserved port, its modification time
// the reservation's; every process of the machine that uses this package
// shares it. A var for the tests.
var reservationDir = filepath.Join(os.TempDir(), "txncoord-freeport")

// reserve claims base .. base+n-1 unless one of them was claimed less than
// reservedFor ago, by this process or another (two packages' tests run at
// once, each drawing ports at random: a port both drew, bindable for each
// until the first child bound it, failed the second child's bind). The
// claim is made under an flock of the directory's lock file, so two
// processes cannot both take a port. Where the directory cannot be used,
// every port counts as free: the bind check alone, as before.
func reserve(base, n int) bool {
	if err := os.MkdirAll(reservationDir, 0o777); err != nil {
		return true
	}
	lock, err := os.OpenFile(filepath.Join(reservationDir, "lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return true
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	now := time.Now()
	for p := base; p < base+n; p++ {
		if st, err := os.Stat(filepath.Join(reservationDir, strconv.Itoa(p))); err == nil && now.Sub(st.ModTime()) < reservedFor {
			return false
		}
	}
	for p := base; p < base+n; p++ {
		path := filepath.Join(reservationDir, strconv.Itoa(p))
		if err := os.WriteFile(path, nil, 0o666); err != nil {
			return true
		}
		_ = os.Chtimes(path, now, now)
	}
	return true
}
