package integration

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/integration/wordcount"
	"github.com/txncoord/txncoord/internal/freeport"
)

var countApp helperBin

// countAppBinary builds ./integration/countapp once per test run.
func countAppBinary(t testing.TB) string {
	t.Helper()
	return countApp.build(t, "countapp", "./integration/countapp")
}

// appProc is one run of countapp.
type appProc struct {
	proc
	sum      chan int // each committed sum, latest wins
	restored int      // changelog records its restore read
}

// startCountApp starts countapp and waits for its restore.
func startCountApp(t *testing.T, dir string, n int, args ...string) *appProc {
	t.Helper()
	logPath := filepath.Join(dir, fmt.Sprintf("countapp-%d.log", n))
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(countAppBinary(t), args...)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &appProc{proc: proc{name: "countapp", cmd: cmd, done: make(chan struct{}), log: logPath}, sum: make(chan int, 1)}
	ready := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "countapp ready "); ok {
				_, recs, _ := strings.Cut(rest, "records=")
				n, _ := strconv.Atoi(recs)
				ready <- n
			}
			if rest, ok := strings.CutPrefix(line, "countapp committed sum="); ok {
				n, _ := strconv.Atoi(rest)
				select {
				case <-p.sum:
				default:
				}
				p.sum <- n
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	select {
	case p.restored = <-ready:
	case <-p.done:
		// An exit before the restore is a run that failed: the caller
		// starts another.
	case <-time.After(90 * time.Second):
		t.Fatalf("countapp: not restored in 90 s\n%s", tail(logPath))
	}
	return p
}

// TestCompactedChangelogSIGKILL: a stateful exactly-once application (a
// word count on kgo's GroupTransactSession, its counts in a compacted
// changelog it restores from, integration/wordcount) runs as a child
// process against `txncoord up`, also a child, whose leaders clean every
// 50 ms. The app is SIGKILLed mid-run; the changelog is cleaned before
// the next instance restores from it; then txncoord itself is SIGKILLed
// mid-run and restarted on its data dir, and the app, restarted whenever
// it exits on an error, finishes. The counts restored from the changelog
// are exact, and once cleaned the changelog holds about one record per
// word.
func TestCompactedChangelogSIGKILL(t *testing.T) {
	const (
		input, changelog = "words", "counts-changelog"
		total, words     = 3000, 20
	)
	base, err := freeport.Run(4)
	if err != nil {
		t.Fatal(err)
	}
	pc := &procCluster{t: t, bin: txncoordBinary(t), dir: keptDir(t)}
	pc.coordAt = fmt.Sprintf("127.0.0.1:%d", base)
	for i := range 4 {
		pc.seeds = append(pc.seeds, fmt.Sprintf("127.0.0.1:%d", base+i))
	}
	pc.upArgs = []string{"up", "--data-dir", filepath.Join(pc.dir, "data"), "--listen", pc.coordAt,
		"--leaders", "4.2,4.2,4.2", "--topics", input + ":2", "--admin-listen=", "--log-cleaner-backoff", "50ms"}
	pc.StartCoordinator()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	adm := pc.admin()
	configs := map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "segment.ms": kadm.StringPtr("1"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"), "delete.retention.ms": kadm.StringPtr("100")}
	if c, err := adm.CreateTopic(ctx, 1, -1, configs, changelog); err != nil || c.Err != nil {
		t.Fatalf("create %s: %v %v", changelog, err, c.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.seeds...), kgo.DefaultProduceTopic(input))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]int{}
	var recs []*kgo.Record
	for i := range total {
		w := fmt.Sprintf("w%02d", i%words)
		want[w]++
		recs = append(recs, &kgo.Record{Value: []byte(w)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	args := []string{"--bootstrap", strings.Join(pc.seeds, ","), "--input", input, "--changelog", changelog,
		"--expect", strconv.Itoa(total), "--batch", "20", "--pause", "20ms"}
	runs := 0
	start := func() *appProc {
		runs++
		return startCountApp(t, pc.dir, runs, args...)
	}
	// waitSum waits until app has committed at least n, or has exited.
	waitSum := func(app *appProc, n int) bool {
		t.Helper()
		for {
			select {
			case s := <-app.sum:
				if s >= n {
					return true
				}
			case <-app.done:
				return false
			case <-ctx.Done():
				t.Fatalf("countapp did not reach %d\n%s", n, tail(app.log))
			}
		}
	}

	// 1. The app counts a quarter of the input and is SIGKILLed, most
	// likely inside a transaction.
	app := start()
	for !waitSum(app, total/4) {
		app = start()
	}
	app.kill()
	t.Logf("countapp SIGKILLed after committing at least %d", total/4)
	last := changelogEnd(ctx, t, adm, changelog)

	// 2. A clean in between: the next instance restores from a changelog
	// the cleaner has shrunk (fewer records read than it holds offsets).
	app = start()
	for app.restored == 0 || app.restored >= int(last)/2 {
		app.kill()
		if time.Now().After(deadlineOf(ctx)) {
			t.Fatalf("the changelog (%d offsets) was not cleaned: a restore read %d records", last, app.restored)
		}
		time.Sleep(200 * time.Millisecond)
		app = start()
	}
	t.Logf("restored from %d records of a changelog of %d offsets", app.restored, last)

	// 3. txncoord is SIGKILLed while the app runs, and restarted on its
	// data dir; the app goes on, or exits on an error and is started
	// again, until it has counted everything.
	for !waitSum(app, total/2) {
		app = start()
	}
	pc.Coord.kill()
	t.Logf("txncoord up SIGKILLed with countapp at least %d", total/2)
	time.Sleep(500 * time.Millisecond)
	pc.StartCoordinator()
	for {
		<-app.done
		if app.cmd.ProcessState.Success() {
			break
		}
		if runs > 20 {
			t.Fatalf("countapp failed %d times; last:\n%s", runs, tail(app.log))
		}
		t.Logf("countapp run %d exited with %s: starting it again", runs, app.cmd.ProcessState)
		app = start()
	}

	// The counts are exact, and the cleaner shrinks the changelog to
	// about one record per word (and the barriers' key).
	for {
		counts, n := restoreChangelog(ctx, t, pc.seeds, changelog)
		if !maps.Equal(counts, want) {
			t.Fatalf("counts restored from the changelog %v, want %v", counts, want)
		}
		if n <= words+3 {
			t.Logf("%d runs of countapp; the changelog restores the exact counts from %d records (%d words)", runs, n, words)
			break
		}
		if time.Now().After(deadlineOf(ctx)) {
			t.Fatalf("the changelog still holds %d records for %d words", n, words)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d.Add(-30 * time.Second)
}

// changelogEnd is the changelog's high watermark.
func changelogEnd(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// restoreChangelog restores the counts as the app does.
func restoreChangelog(ctx context.Context, t *testing.T, seeds []string, topic string) (map[string]int, int) {
	t.Helper()
	counts, n, err := wordcount.Restore(ctx, seeds, topic)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return counts, n
}
