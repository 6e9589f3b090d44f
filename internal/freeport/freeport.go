// Package freeport finds runs of free TCP ports on 127.0.0.1, for starting
// `txncoord up` (which puts leader i on port+i) in tests, the benchmark and
// the interop script.
package freeport

import (
	"errors"
	"net"
	"strconv"
)

// Run returns a port P such that 127.0.0.1:P .. P+n-1 could all be bound a
// moment ago: the kernel picks P, and the next n-1 ports are tried. The
// ports are released before it returns, so another process may take one
// before the caller binds it; callers that start a server retry on that.
func Run(n int) (int, error) {
	for range 50 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := first.Addr().(*net.TCPAddr).Port
		held := []net.Listener{first}
		ok := base+n-1 <= 65535
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			l.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("freeport: no run of free consecutive ports found")
}
