// Command walcandidates measures the WAL libraries named in the
// storage-redesign issue on this disk: appends per second and the p50/p99
// latency of an append that returns only once the record is durable.
//
//	go run . -dir /work/main/bench/walcandidates/tmp
//
// Every (candidate, size, mode) cell runs -runs times for -dur each, in a
// fresh directory that is removed afterwards; the runs of all cells are
// interleaved (round 1 of every cell, then round 2, …) so that drift in the
// shared machine's load spreads over all candidates alike. The table printed
// at the end holds the median of the runs for each figure.
//
// Modes:
//
//   - seq: one appender; each record is appended and synced before the next
//     is offered (the library's own single-record durable append).
//   - group16: 16 concurrent appenders each offer one record and wait for it
//     to be durable. None of the candidates batches concurrent callers by
//     itself (each holds one mutex across its write and its sync), so the
//     harness supplies the group commit identically for all: one committer
//     goroutine takes every record waiting at that moment, hands them to the
//     library as one batch that ends in one sync, then wakes their appenders.
//     How each library is driven is in its appender below. txncoord/wal
//     has its own group commit: its 16 appenders call Append + WaitDurable
//     themselves, without the harness's committer.
//   - direct16: 16 concurrent appenders each call the library's own
//     single-record durable append (as in seq), with no batching by anyone.
//     A harness mutex makes "take the next index, append" one step, which
//     raft-wal and tidwall/wal require (index = last+1) and which the
//     libraries' own mutex serializes anyway. It shows what a library gives
//     concurrent callers by itself. Not meaningful for the raw floors (no
//     library) nor for txncoord/wal (the same as its group16).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	tidwal "github.com/tidwall/wal"
	txnwal "github.com/txncoord/txncoord/wal"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// appender is one open log. appendBatch writes recs as consecutive entries
// and returns once they are durable (one sync for the whole batch).
type appender interface {
	appendBatch(recs [][]byte) error
	close() error
}

type candidate struct {
	name string
	// open creates a new log in dir, which does not exist yet. group says
	// whether the harness will hand it batches (tidwall/wal is then opened
	// with NoSync and synced explicitly).
	open func(dir string, group bool) (appender, error)
}

var candidates = []candidate{
	{"raw-append", openRawAppend},
	{"raw-prealloc", openRawPrealloc},
	{"tidwall/wal", openTidwall},
	{"hashicorp/raft-wal", openRaftWAL},
	{"etcd/wal", openEtcd},
	{"txncoord/wal", openTxncoord},
}

// ---- floor: os.File + fdatasync --------------------------------------------

// rawFile writes each batch as one pwrite at the end of the file and
// fdatasyncs it. With prealloc the file is first fallocated in 64 MiB steps
// (as etcd's and raft-wal's segments are), so the sync carries no size change.
type rawFile struct {
	f        *os.File
	off      int64
	prealloc bool
	alloc    int64
	buf      []byte
}

const rawChunk = 64 << 20

func openRawAppend(dir string, _ bool) (appender, error)   { return openRaw(dir, false) }
func openRawPrealloc(dir string, _ bool) (appender, error) { return openRaw(dir, true) }

func openRaw(dir string, prealloc bool) (appender, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &rawFile{f: f, prealloc: prealloc}, nil
}

func (r *rawFile) appendBatch(recs [][]byte) error {
	r.buf = r.buf[:0]
	for _, rec := range recs {
		r.buf = append(r.buf, rec...)
	}
	for r.prealloc && r.off+int64(len(r.buf)) > r.alloc {
		if err := unix.Fallocate(int(r.f.Fd()), 0, r.alloc, rawChunk); err != nil {
			return err
		}
		r.alloc += rawChunk
	}
	if _, err := r.f.WriteAt(r.buf, r.off); err != nil {
		return err
	}
	r.off += int64(len(r.buf))
	return unix.Fdatasync(int(r.f.Fd()))
}

func (r *rawFile) close() error { return r.f.Close() }

// ---- github.com/tidwall/wal v1.2.1 ------------------------------------------

// tidwallLog: seq calls Log.Write(index, data) with NoSync=false (write, then
// fsync inside the call). group opens with NoSync=true, puts the batch in one
// wal.Batch, calls Log.WriteBatch (one write(2)) and then Log.Sync (one fsync).
type tidwallLog struct {
	l     *tidwal.Log
	next  uint64
	group bool
	b     tidwal.Batch
}

func openTidwall(dir string, group bool) (appender, error) {
	opts := *tidwal.DefaultOptions
	opts.NoSync = group
	l, err := tidwal.Open(dir, &opts)
	if err != nil {
		return nil, err
	}
	return &tidwallLog{l: l, next: 1, group: group}, nil
}

func (t *tidwallLog) appendBatch(recs [][]byte) error {
	if !t.group {
		for _, rec := range recs {
			if err := t.l.Write(t.next, rec); err != nil {
				return err
			}
			t.next++
		}
		return nil
	}
	t.b.Clear()
	for _, rec := range recs {
		t.b.Write(t.next, rec)
		t.next++
	}
	if err := t.l.WriteBatch(&t.b); err != nil {
		return err
	}
	return t.l.Sync()
}

func (t *tidwallLog) close() error { return t.l.Close() }

// ---- github.com/hashicorp/raft-wal v0.4.0 -----------------------------------

// raftWAL: both modes call WAL.StoreLogs with the batch (a single *raft.Log in
// seq): the entries' frames and one commit frame are written with one pwrite
// and the segment file is fsynced once.
type raftWAL struct {
	w    *raftwal.WAL
	meta *metadb.BoltMetaDB
	next uint64
	logs []*raft.Log
}

func openRaftWAL(dir string, _ bool) (appender, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The meta store is passed in only so that close can close it: WAL.Close
	// leaves the default one (and its bbolt file lock) open.
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithLogger(hclog.NewNullLogger()), raftwal.WithMetaStore(meta))
	if err != nil {
		return nil, err
	}
	return &raftWAL{w: w, meta: meta, next: 1}, nil
}

func (r *raftWAL) appendBatch(recs [][]byte) error {
	r.logs = r.logs[:0]
	for _, rec := range recs {
		r.logs = append(r.logs, &raft.Log{Index: r.next, Term: 1, Type: raft.LogCommand, Data: rec})
		r.next++
	}
	return r.w.StoreLogs(r.logs)
}

func (r *raftWAL) close() error {
	err := r.w.Close()
	if cerr := r.meta.Close(); err == nil {
		err = cerr
	}
	return err
}

// ---- go.etcd.io/etcd/server/v3/storage/wal v3.7.3 ---------------------------

// etcdWAL: both modes call WAL.Save(&HardState{}, entries) with the batch as
// raftpb.Entry records: each entry is encoded into the 4 KiB page writer, and
// because entries are present (raft.MustSync) Save ends in one fdatasync.
type etcdWAL struct {
	w    *etcdwal.WAL
	next uint64
	ents []*raftpb.Entry
	hs   raftpb.HardState
}

func openEtcd(dir string, _ bool) (appender, error) {
	w, err := etcdwal.Create(zap.NewNop(), dir, nil)
	if err != nil {
		return nil, err
	}
	return &etcdWAL{w: w, next: 1}, nil
}

func (e *etcdWAL) appendBatch(recs [][]byte) error {
	e.ents = e.ents[:0]
	for _, rec := range recs {
		e.ents = append(e.ents, &raftpb.Entry{Index: new(e.next), Term: new(uint64(1)),
			Type: raftpb.EntryNormal.Enum(), Data: rec})
		e.next++
	}
	return e.w.Save(&e.hs, e.ents)
}

func (e *etcdWAL) close() error { return e.w.Close() }

// ---- github.com/txncoord/txncoord/wal (this repository, via replace ../..) --

// txncoordLog: seq calls Append(rec) and then WaitDurable on its Pos. It
// has its own group commit, so group16 does not use the harness's
// committer: the 16 appenders call Append + WaitDurable themselves and the
// log's writer goroutine batches whatever is queued into one write and one
// fdatasync (records/sync comes from its Stats).
type txncoordLog struct{ l *txnwal.Log }

func openTxncoord(dir string, _ bool) (appender, error) {
	l, err := txnwal.Open(dir, txnwal.Options{})
	if err != nil {
		return nil, err
	}
	return &txncoordLog{l: l}, nil
}

func (t *txncoordLog) appendBatch(recs [][]byte) error { return t.appendDurable(recs...) }

func (t *txncoordLog) appendDurable(recs ...[]byte) error {
	p, err := t.l.Append(recs...)
	if err != nil {
		return err
	}
	return t.l.WaitDurable(context.Background(), p)
}

func (t *txncoordLog) syncCount() int { return int(t.l.Stats().Syncs) }

func (t *txncoordLog) close() error { return t.l.Close() }

// selfBatching is an appender that does its own group commit: in group16 the
// appenders call appendDurable concurrently, without the harness committer.
type selfBatching interface {
	appendDurable(recs ...[]byte) error
	syncCount() int
}

// ---- harness ----------------------------------------------------------------

type result struct {
	appends  int
	syncs    int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r result) perSec() float64 { return float64(r.appends) / r.elapsed.Seconds() }

func (r result) perSync() float64 {
	if r.syncs == 0 {
		return 0
	}
	return float64(r.appends) / float64(r.syncs)
}

func summarize(lat []time.Duration, syncs int, elapsed time.Duration) result {
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	return result{appends: len(lat), syncs: syncs, elapsed: elapsed, p50: q(0.5), p99: q(0.99)}
}

func runSeq(a appender, recs [][]byte, d time.Duration) (result, error) {
	var lat []time.Duration
	one := make([][]byte, 1)
	start := time.Now()
	for i := 0; time.Since(start) < d; i++ {
		one[0] = recs[i%len(recs)]
		t := time.Now()
		if err := a.appendBatch(one); err != nil {
			return result{}, err
		}
		lat = append(lat, time.Since(t))
	}
	return summarize(lat, len(lat), time.Since(start)), nil
}

type request struct {
	data []byte
	done chan error
}

func runGroup(a appender, recs [][]byte, d time.Duration, writers int) (result, error) {
	if sb, ok := a.(selfBatching); ok {
		return runSelfBatching(sb, recs, d, writers)
	}
	reqs := make(chan *request, writers)
	var syncs int
	var commitErr error
	committed := make(chan struct{})
	go func() { // the committer: one batch, one sync, per turn
		defer close(committed)
		var batch []*request
		var datas [][]byte
		for r := range reqs {
			batch = append(batch[:0], r)
		drain:
			for {
				select {
				case r2, ok := <-reqs:
					if !ok {
						break drain
					}
					batch = append(batch, r2)
				default:
					break drain
				}
			}
			datas = datas[:0]
			for _, b := range batch {
				datas = append(datas, b.data)
			}
			err := a.appendBatch(datas)
			if err != nil && commitErr == nil {
				commitErr = err
			}
			syncs++
			for _, b := range batch {
				b.done <- err
			}
		}
	}()

	lats := make([][]time.Duration, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &request{done: make(chan error, 1)}
			for i := w; time.Since(start) < d; i += writers {
				r.data = recs[i%len(recs)]
				t := time.Now()
				reqs <- r
				if err := <-r.done; err != nil {
					errs[w] = err
					return
				}
				lats[w] = append(lats[w], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(reqs)
	<-committed
	if commitErr != nil {
		return result{}, commitErr
	}
	for _, err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	return summarize(slices.Concat(lats...), syncs, elapsed), nil
}

func runSelfBatching(a selfBatching, recs [][]byte, d time.Duration, writers int) (result, error) {
	syncs0 := a.syncCount()
	lats := make([][]time.Duration, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for i := w; time.Since(start) < d; i += writers {
				t := time.Now()
				if err := a.appendDurable(recs[i%len(recs)]); err != nil {
					errs[w] = err
					return
				}
				lats[w] = append(lats[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	return summarize(slices.Concat(lats...), a.syncCount()-syncs0, elapsed), nil
}

func runDirect(a appender, recs [][]byte, d time.Duration, writers int) (result, error) {
	var mu sync.Mutex
	lats := make([][]time.Duration, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			one := make([][]byte, 1)
			for i := w; time.Since(start) < d; i += writers {
				one[0] = recs[i%len(recs)]
				t := time.Now()
				mu.Lock()
				err := a.appendBatch(one)
				mu.Unlock()
				if err != nil {
					errs[w] = err
					return
				}
				lats[w] = append(lats[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	all := slices.Concat(lats...)
	return summarize(all, len(all), elapsed), nil
}

type cell struct {
	cand candidate
	size int
	mode string
	runs []result
}

func main() {
	dir := flag.String("dir", "", "scratch directory on the disk to measure (created, and removed at the end if it did not exist)")
	dur := flag.Duration("dur", 3*time.Second, "length of one run")
	runs := flag.Int("runs", 3, "runs per cell; the table shows their medians")
	sizesFlag := flag.String("sizes", "4096,16384,65536", "record sizes in bytes")
	modesFlag := flag.String("modes", "seq,group16", "modes to run: seq, group16, direct16")
	only := flag.String("only", "", "comma-separated candidate names to run (default all)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "walcandidates: -dir is required")
		os.Exit(2)
	}
	_, statErr := os.Stat(*dir)
	created := os.IsNotExist(statErr)
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fatal(err)
	}
	if created {
		defer os.RemoveAll(*dir)
	}

	var sizes []int
	for _, s := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fatal(err)
		}
		sizes = append(sizes, n)
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var cells []*cell
	for _, c := range candidates {
		if len(want) > 0 && !want[c.name] {
			continue
		}
		for _, s := range sizes {
			for _, m := range strings.Split(*modesFlag, ",") {
				cells = append(cells, &cell{cand: c, size: s, mode: m})
			}
		}
	}

	// 64 distinct random records per size; the libraries copy what they are given.
	recsBySize := map[int][][]byte{}
	for _, s := range sizes {
		for range 64 {
			b := make([]byte, s)
			rand.Read(b)
			recsBySize[s] = append(recsBySize[s], b)
		}
	}

	fmt.Fprintf(os.Stderr, "walcandidates: %d cells x %d runs x %v in %s\n", len(cells), *runs, *dur, *dir)
	for round := range *runs {
		for i, c := range cells {
			d := filepath.Join(*dir, fmt.Sprintf("r%d-c%02d", round, i))
			a, err := c.cand.open(d, c.mode != "seq")
			if err != nil {
				fatal(fmt.Errorf("%s: open: %w", c.cand.name, err))
			}
			var r result
			switch c.mode {
			case "seq":
				r, err = runSeq(a, recsBySize[c.size], *dur)
			case "group16":
				r, err = runGroup(a, recsBySize[c.size], *dur, 16)
			case "direct16":
				r, err = runDirect(a, recsBySize[c.size], *dur, 16)
			default:
				err = fmt.Errorf("unknown mode %q", c.mode)
			}
			if err != nil {
				fatal(fmt.Errorf("%s %d %s: %w", c.cand.name, c.size, c.mode, err))
			}
			if err := a.close(); err != nil {
				fatal(fmt.Errorf("%s: close: %w", c.cand.name, err))
			}
			if err := os.RemoveAll(d); err != nil {
				fatal(err)
			}
			c.runs = append(c.runs, r)
			fmt.Fprintf(os.Stderr, "run %d  %-18s %6s %-8s %8.0f/s  p50 %-9v p99 %-9v %5.1f rec/sync\n",
				round+1, c.cand.name, kib(c.size), c.mode, r.perSec(), r.p50.Round(time.Microsecond),
				r.p99.Round(time.Microsecond), r.perSync())
		}
	}

	var out bytes.Buffer
	fmt.Fprintf(&out, "| candidate | size | mode | appends/s | p50 | p99 | records/sync |\n")
	fmt.Fprintf(&out, "| --- | ---: | --- | ---: | ---: | ---: | ---: |\n")
	for _, c := range cells {
		fmt.Fprintf(&out, "| %s | %s | %s | %.0f | %s | %s | %.1f |\n", c.cand.name, kib(c.size), c.mode,
			median(c.runs, func(r result) float64 { return r.perSec() }),
			ms(median(c.runs, func(r result) float64 { return float64(r.p50) })),
			ms(median(c.runs, func(r result) float64 { return float64(r.p99) })),
			median(c.runs, func(r result) float64 { return r.perSync() }))
	}
	os.Stdout.Write(out.Bytes())
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ms(ns float64) string { return fmt.Sprintf("%.2f ms", ns/1e6) }

func kib(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "walcandidates:", err)
	os.Exit(1)
}
