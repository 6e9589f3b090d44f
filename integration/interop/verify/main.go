// Command verify checks what non-Go clients (kcat, KafkaJS) left in a
// txncoord cluster, with franz-go: a read_committed read of every partition
// of a topic (after every transaction on it has ended) must show each
// -want value exactly once and no -absent value. It is the checking half of
// integration/interop/run.sh.
//
//	verify check -bootstrap ADDR -topic T -partitions N -want a,b -absent c,d -absent-prefix x-
//	verify wait-written -bootstrap ADDR -topic T -partitions N -values a,b
//	    waits until the values are in the log (read_uncommitted), e.g.
//	    before killing a producer whose open transaction must then abort
//	verify freeport -n N
//	    prints a port P such that 127.0.0.1:P .. P+N-1 could all be bound
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/integration/checker"
	"github.com/txncoord/txncoord/integration/workload"
	"github.com/txncoord/txncoord/internal/freeport"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: verify check|wait-written|freeport [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "cluster address")
	topic := fs.String("topic", "interop", "topic")
	partitions := fs.Int("partitions", 1, "partitions of the topic")
	want := fs.String("want", "", "values that must be visible exactly once (comma-separated)")
	absent := fs.String("absent", "", "values that must not be visible")
	absentPrefix := fs.String("absent-prefix", "", "no visible value may start with this (comma-separated prefixes)")
	values := fs.String("values", "", "wait-written: values that must be in the log")
	n := fs.Int("n", 1, "freeport: consecutive ports")
	timeout := fs.Duration("timeout", 60*time.Second, "overall timeout")
	fs.Parse(os.Args[2:])
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var ps []checker.Partition
	for p := 0; p < *partitions; p++ {
		ps = append(ps, checker.Partition{Topic: *topic, Partition: int32(p)})
	}
	var err error
	switch os.Args[1] {
	case "check":
		err = check(ctx, *bootstrap, ps, split(*want), split(*absent), split(*absentPrefix))
	case "wait-written":
		err = waitWritten(ctx, *bootstrap, *topic, split(*values))
	case "freeport":
		var port int
		if port, err = freeport.Run(*n); err == nil {
			fmt.Println(port)
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func check(ctx context.Context, bootstrap string, ps []checker.Partition, want, absent, absentPrefixes []string) error {
	reads, err := workload.ReadCommitted(ctx, []string{bootstrap}, ps)
	if err != nil {
		return err
	}
	seen := map[string]int{}
	total := 0
	for _, recs := range reads {
		for _, r := range recs {
			seen[r.Value]++
			total++
		}
	}
	var errs []error
	for _, v := range want {
		if seen[v] != 1 {
			errs = append(errs, fmt.Errorf("committed value %q visible %d times, want once", v, seen[v]))
		}
	}
	for _, v := range absent {
		if seen[v] != 0 {
			errs = append(errs, fmt.Errorf("aborted value %q visible %d times under read_committed", v, seen[v]))
		}
	}
	for v, n := range seen {
		for _, prefix := range absentPrefixes {
			if strings.HasPrefix(v, prefix) {
				errs = append(errs, fmt.Errorf("aborted value %q (prefix %q) visible %d times under read_committed", v, prefix, n))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("verify: read_committed saw %d records; %d committed values once each, %d aborted values absent\n", total, len(want), len(absent))
	return nil
}

func waitWritten(ctx context.Context, bootstrap, topic string, values []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	missing := map[string]bool{}
	for _, v := range values {
		missing[v] = true
	}
	for len(missing) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("values never written: %v: %w", missing, ctx.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) { delete(missing, string(r.Value)) })
	}
	return nil
}
