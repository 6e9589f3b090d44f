// Command txncoord-bench runs the benchmark: real kgo TV2 transactional
// producers against txncoord, kfake in memory and kfake with SyncWrites,
// side by side, each target in a child process, reporting the storage
// redesign's goals. See package bench.
//
//	txncoord-bench --producers 1,16,64 --duration 10s --rounds 3 \
//	    --targets txncoord,kfake,kfake-sync,txncoord-nosync --out results
//	txncoord-bench scale --ids 2000 --groups 1000 --window 30s --after-kill 30s
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/txncoord/txncoord/bench"
)

func main() {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "txncoord-bench: cannot find own executable:", err)
		os.Exit(1)
	}
	// SIGINT/SIGTERM end the current window early; the runner still stops
	// its children and writes what it has.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], bench.Command{Path: self}, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
