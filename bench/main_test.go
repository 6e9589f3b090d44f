package bench

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// childEnv makes the test binary act as the serve-kfake child, so the child
// process path is tested without building the command.
const childEnv = "TXNCOORD_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], Command{}, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// selfCommand re-executes this test binary as the bench command.
func selfCommand(t *testing.T) Command {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Command{Path: exe, Env: []string{childEnv + "=1"}}
}
