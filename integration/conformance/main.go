package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve-kfake" {
		os.Exit(serveKfake(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kgoDir := fs.String("kgo-dir", "", "franz-go's pkg/kgo source directory (its tests are read to find the broker tests)")
	testBin := fs.String("kgo-test", "bin/kgo.test", "pkg/kgo's test binary (go test -c)")
	txncoordBin := fs.String("txncoord", "bin/txncoord", "the txncoord binary")
	targetList := fs.String("targets", "txncoord,kfake", "targets, in column order: txncoord, kfake")
	only := fs.String("run", "", "run only the broker tests matching this regexp")
	timeout := fs.Duration("timeout", 3*time.Minute, "per test (kfake runs the longest, TestGroupETL, in about 20 s)")
	records := fs.Int("records", 100000, "KGO_TEST_RECORDS: records of the ETL tests (franz-go's default is 500000)")
	parallel := fs.Int("parallel", 1, "tests run at once, each with its own server")
	logs := fs.String("logs", "bin/conformance-logs", "logs of every run: LOGS/TARGET/TEST/{test,server}.log")
	upArgs := fs.String("up-args", "", "more arguments for txncoord up, space separated")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kgoDir == "" || fs.NArg() > 0 || *parallel < 1 {
		fmt.Fprintln(stderr, "usage: conformance --kgo-dir DIR [flags]   (make conformance sets it up)")
		fs.PrintDefaults()
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 1
	}
	var targets []target
	var names []string
	for _, name := range strings.Split(*targetList, ",") {
		switch name {
		case "txncoord":
			bin, err := filepath.Abs(*txncoordBin)
			if err != nil {
				fmt.Fprintln(stderr, "conformance:", err)
				return 1
			}
			targets = append(targets, txncoordTarget(bin, strings.Fields(*upArgs)))
		case "kfake":
			targets = append(targets, kfakeTarget(self))
		default:
			fmt.Fprintf(stderr, "conformance: unknown target %q (txncoord, kfake)\n", name)
			return 2
		}
		names = append(names, name)
	}
	filter, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintln(stderr, "conformance: --run:", err)
		return 2
	}

	all, err := discoverBrokerTests(*kgoDir)
	if err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 1
	}
	var tests []string
	for _, test := range all {
		if filter.MatchString(test) {
			tests = append(tests, test)
		}
	}
	if len(tests) == 0 {
		fmt.Fprintf(stderr, "conformance: no broker test matches --run %q\n", *only)
		return 2
	}
	bin, err := filepath.Abs(*testBin)
	if err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 1
	}
	logDir, err := filepath.Abs(*logs)
	if err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 1
	}
	if err := os.RemoveAll(logDir); err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 1
	}
	su := &suite{testBin: bin, kgoDir: *kgoDir, timeout: *timeout, records: *records}
	fmt.Fprintf(stderr, "conformance: %d of %d broker tests x %s, %d at a time, timeout %s each; logs in %s\n",
		len(tests), len(all), strings.Join(names, ","), *parallel, *timeout, logDir)

	// Every (test, target) run is a job; a pool of --parallel workers runs
	// them in table order.
	type job struct {
		t    target
		test string
	}
	jobs := make(chan job)
	results := map[string]map[string]result{}
	for _, name := range names {
		results[name] = map[string]result{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	total, finished := len(tests)*len(targets), 0
	for range *parallel {
		wg.Go(func() {
			for j := range jobs {
				r := su.run(j.t, j.test, filepath.Join(logDir, j.t.name, j.test))
				mu.Lock()
				results[j.t.name][j.test] = r
				finished++
				fmt.Fprintf(stderr, "[%d/%d] %-8s %-55s %s\n", finished, total, j.t.name, j.test, r)
				mu.Unlock()
			}
		})
	}
	for _, test := range tests {
		for _, t := range targets {
			jobs <- job{t, test}
		}
	}
	close(jobs)
	wg.Wait()

	v := judge(all, results["txncoord"])
	report(stdout, tests, names, results, v)
	if _, ok := results["txncoord"]; ok {
		causes(stdout, tests, results, su.served)
	}
	fmt.Fprintf(stdout, "logs: %s\n", logDir)
	if !v.ok() {
		return 1
	}
	return 0
}
