// Command eosmember runs one member of an exactly-once chain stage (package
// eos) until SIGTERM or SIGINT, appending its history to a file. Chain
// starts it as a child process so that a member can be SIGKILLed.
//
// Exit status: 0 after a graceful stop, 1 when the member could not go on
// (the chain restarts it), 2 for bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/txncoord/txncoord/integration/eos"
)

func main() {
	var (
		cfg       eos.MemberConfig
		bootstrap string
	)
	flag.StringVar(&cfg.Client, "client", "kgo", "kgo, sarama or confluent")
	flag.StringVar(&bootstrap, "bootstrap", "", "comma-separated seed brokers")
	flag.IntVar(&cfg.Stage, "stage", 1, "stage number (1 for the first)")
	flag.StringVar(&cfg.Group, "group", "", "consumer group")
	flag.StringVar(&cfg.From, "from", "", "topic to consume")
	flag.StringVar(&cfg.To, "to", "", "topic to produce to")
	flag.StringVar(&cfg.Name, "name", "", "member name, unique per process")
	flag.StringVar(&cfg.TxnID, "txn-id", "", "transactional id (one per slot)")
	flag.StringVar(&cfg.History, "history", "", "history file")
	flag.Float64Var(&cfg.AbortP, "abort-p", 0, "probability of aborting a transaction on purpose")
	flag.Int64Var(&cfg.Seed, "seed", 1, "random seed")
	flag.IntVar(&cfg.BatchMax, "batch", 50, "records per transaction at most")
	flag.DurationVar(&cfg.Pause, "pause", 0, "sleep after each transaction")
	flag.DurationVar(&cfg.SessionTimeout, "session-timeout", 6*time.Second, "group session timeout")
	flag.DurationVar(&cfg.TxnTimeout, "txn-timeout", 10*time.Second, "transaction timeout")
	flag.Parse()
	cfg.Bootstrap = strings.Split(bootstrap, ",")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Println("eosmember ready " + cfg.Name)
	if err := eos.RunMember(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "eosmember %s: %v\n", cfg.Name, err)
		os.Exit(1)
	}
}
