package main

import (
	"os"
	"runtime/debug"
)

// serverGCPercent is the node commands' GOGC when the environment sets
// none. A node's live heap is small (tens of MiB: indexes, producer state,
// the transactions in flight) while its commit path allocates ~28 KB per
// transaction, so at the Go default of 100 the collector runs several times
// a second under load and its marking and assists take 10–15% of the
// process's CPU. At 300 the heap may grow to four times the live heap
// instead of twice: in `make bench` at 64 producers peak RSS went from
// ~80 to ~130 MiB and the server's CPU per transaction fell by about a
// tenth (docs/bench/20261202-commit-cpu2/). A node whose live heap is
// large pays four times it: GOGC (or GOMEMLIMIT with GOGC=off) in the
// environment overrides this default.
const serverGCPercent = 300

// setServerGC applies serverGCPercent unless GOGC is set.
func setServerGC() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(serverGCPercent)
}
