// Command saramaworker runs the sarama workload driver in a process of its
// own, built without -race, for test binaries built with it (see
// workload.Sarama): it reads a workload.Config (JSON) on stdin, logs to
// stderr and writes the History and error (JSON) to stdout. SIGTERM or
// SIGINT, or EOF on stdin, stops the workload as a cancelled context
// does; the History is written all the same.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/txncoord/txncoord/integration/workload"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := workload.SaramaWorker(ctx, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
