// Command countapp runs the word count of package wordcount as a child
// process of the integration tests, so that it and txncoord can be
// SIGKILLed while it runs.
//
// Stdout: "countapp ready restored=N records=R" once restored (N the sum of
// the counts, R the changelog records read), then "countapp committed
// sum=N" after each committed transaction.
//
// Exit status: 0 once the counts sum to at least --expect; 1 when it could
// not go on (an error from the client: the test starts it again, and it
// restores); 2 for bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/txncoord/txncoord/integration/wordcount"
)

func main() {
	var cfg wordcount.Config
	var bootstrap string
	flag.StringVar(&bootstrap, "bootstrap", "", "comma-separated seed brokers")
	flag.StringVar(&cfg.Input, "input", "words", "topic of words to count")
	flag.StringVar(&cfg.Changelog, "changelog", "counts-changelog", "compacted changelog topic (one partition)")
	flag.StringVar(&cfg.Group, "group", "count-app", "consumer group")
	flag.StringVar(&cfg.TxnID, "txn-id", "count-app", "transactional id")
	flag.IntVar(&cfg.Expect, "expect", 0, "stop once the counts sum to this")
	flag.IntVar(&cfg.Batch, "batch", 20, "records per transaction at most")
	flag.DurationVar(&cfg.Pause, "pause", 0, "sleep after each transaction")
	flag.DurationVar(&cfg.TxnTimeout, "txn-timeout", 6*time.Second, "transaction timeout")
	flag.Parse()
	if bootstrap == "" || cfg.Expect <= 0 {
		fmt.Fprintln(os.Stderr, "countapp: --bootstrap and --expect are required")
		os.Exit(2)
	}
	cfg.Seeds = strings.Split(bootstrap, ",")
	cfg.Out = prefixed{os.Stdout}
	if err := wordcount.Run(context.Background(), cfg); err != nil {
		fmt.Fprintf(os.Stderr, "countapp: %v\n", err)
		os.Exit(1)
	}
}

// prefixed writes each line with "countapp " in front.
type prefixed struct{ w io.Writer }

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, "countapp "); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}
