package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/bench"
	"github.com/txncoord/txncoord/cluster"
)

// The producers of BenchmarkCommitPath run in a child process (this test
// binary again, driving TestCommitPathDriver), so that the benchmark's
// process is the server alone: its allocations (-benchmem's allocs/op,
// one op being one committed transaction) and its CPU time are the
// server's, as `txncoord up` would spend them, not the kgo clients'.
const driveEnv = "TXNCOORD_COMMIT_BENCH_DRIVE"

// BenchmarkCommitPath64 is the bench tool's workload (kgo TV2 producers,
// one record to each of two partitions on different leaders, commit) at
// 64 producers against `txncoord up` with two 4.2 leaders, in-process.
// It reports the server's allocations and bytes per transaction
// (-benchmem) and its CPU time per transaction (cpu-ns/txn, getrusage);
// neither depends much on the machine's load, unlike ns/op.
func BenchmarkCommitPath64(b *testing.B) { benchmarkCommitPath(b, 64, false) }

// BenchmarkCommitPath1 is the same with one producer.
func BenchmarkCommitPath1(b *testing.B) { benchmarkCommitPath(b, 1, false) }

// BenchmarkCommitPath64NoSync is BenchmarkCommitPath64 with the log's
// fdatasync skipped (--unsafe-no-fsync): the server's own CPU per
// transaction without the kernel's share of a flush.
func BenchmarkCommitPath64NoSync(b *testing.B) { benchmarkCommitPath(b, 64, true) }

func benchmarkCommitPath(b *testing.B, producers int, noSync bool) {
	listeners := map[int32]net.Listener{}
	addr := func(id int32) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		listeners[id] = ln
		return ln.Addr().String()
	}
	f := &cluster.File{ClusterID: "commit-bench", DefaultPartitions: 2, Topics: map[string]int32{"bench": 4},
		Coordinator: &cluster.Node{NodeID: 0, Addr: addr(0), KafkaVersion: "4.2"}}
	for id := int32(1); id <= 2; id++ {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: id, Addr: addr(id), KafkaVersion: "4.2"})
	}
	if err := f.Validate(); err != nil {
		b.Fatal(err)
	}
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: b.TempDir(), Listeners: listeners, Log: zerolog.Nop(),
		UnsafeNoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Stop(context.Background())

	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitPathDriver$", "-test.count=1")
	cmd.Env = append(os.Environ(), driveEnv+"="+e.Bootstrap()+","+strconv.Itoa(producers)+","+strconv.Itoa(b.N))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	out := bufio.NewScanner(outPipe)
	expect := func(word string) {
		for out.Scan() {
			if out.Text() == word {
				return
			}
		}
		cmd.Process.Kill()
		b.Fatalf("driver ended before %q: %v", word, out.Err())
	}
	expect("start")
	runtime.GC()
	cpu0, syncs0 := selfCPU(b), e.Shared.Stats().Fdatasyncs
	b.ResetTimer()
	fmt.Fprintln(in, "go")
	expect("end")
	b.StopTimer()
	cpu, syncs := selfCPU(b)-cpu0, e.Shared.Stats().Fdatasyncs-syncs0
	fmt.Fprintln(in, "go")
	expect("ok")
	in.Close()
	io.Copy(io.Discard, outPipe)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/txn")
	// Group commits per transaction: each fdatasync costs CPU in the
	// kernel as well as its latency.
	b.ReportMetric(float64(syncs)/float64(b.N), "syncs/txn")
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCommitPathDriver is BenchmarkCommitPath's child: it runs the bench
// workload's Count transactions against the bootstrap address in
// TXNCOORD_COMMIT_BENCH_DRIVE, and tells the parent on stdout when the
// measured window starts ("start") and ends ("end"), waiting for a line
// on stdin after each so that the parent reads its counters first.
func TestCommitPathDriver(t *testing.T) {
	spec := os.Getenv(driveEnv)
	if spec == "" {
		t.Skip("run by BenchmarkCommitPath")
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		t.Fatalf("%s=%q", driveEnv, spec)
	}
	bootstrap := parts[0]
	producers, _ := strconv.Atoi(parts[1])
	count, _ := strconv.Atoi(parts[2])
	stdin := bufio.NewScanner(os.Stdin)
	handshake := func(word string) {
		fmt.Println(word)
		stdin.Scan()
	}
	w := bench.DefaultWorkload()
	w.Producers, w.Count, w.TxnIDPrefix = producers, int64(count), "commit-bench"
	res, err := bench.Run(context.Background(), []string{bootstrap}, w, bench.Hooks{
		WindowStart: func() { handshake("start") },
		WindowEnd:   func() { handshake("end") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed > 0 || res.Committed != int64(count) {
		t.Fatalf("committed %d of %d, %d failed: %v", res.Committed, count, res.Failed, res.Errors)
	}
	fmt.Println("ok")
}
