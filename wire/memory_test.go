package wire_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/pierrec/lz4/v4"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/node"
	"github.com/txncoord/txncoord/wire"
)

// The memory bounds are measured on the process's resident set
// (/proc/self/status), so they run in a child process: this package's test
// binary built again without the race detector. Under -race every byte the
// program touches has shadow memory (several times its size) and
// decompression runs many times slower, so neither the bound nor the time
// would mean anything. TestMemoryBounds builds the child (`go test -c`,
// cached after the first build) and runs TestMemoryChild in it once per
// case; the child checks its own bounds and the parent reports its output.

const memChildEnv = "TXNCOORD_WIRE_MEMORY_CHILD"

// buildMemoryChild builds this package's tests without the race detector
// into dir.
func buildMemoryChild(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "wire.test")
	out, err := exec.Command("go", "test", "-c", "-race=false", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	return bin
}

// TestMemoryBounds: 24 LZ4 bombs (a record of 1 GiB of zeros, 4 MB on the
// wire each) and 24 gzip bombs (127 MiB, accepted) at once keep the
// process under 1.5 GiB while a transactional producer keeps committing;
// ten clients holding 100 MiB−1 of a 100 MiB frame each grow it by under
// 1 GiB; 3,000 idle connections cost under 30 MB. Each case runs in a
// child process (see above).
func TestMemoryBounds(t *testing.T) {
	if os.Getenv(memChildEnv) != "" {
		t.Skip("in the child")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	start := time.Now()
	bin := buildMemoryChild(t, t.TempDir())
	t.Logf("child built in %v", time.Since(start).Round(time.Millisecond))
	for _, name := range []string{"bombs", "partial-frames", "idle-connections"} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			cmd := exec.Command(bin, "-test.run", "^TestMemoryChild$", "-test.v", "-test.count=1", "-test.timeout=4m")
			cmd.Env = append(os.Environ(), memChildEnv+"="+name)
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "memory_test.go") {
					t.Log(strings.TrimSpace(line))
				}
			}
			if err != nil {
				t.Fatalf("child %s: %v\n%s", name, err, out)
			}
			t.Logf("%s took %v", name, time.Since(start).Round(time.Millisecond))
		})
	}
}

func TestMemoryChild(t *testing.T) {
	switch mode := os.Getenv(memChildEnv); mode {
	case "":
		t.Skip("run by TestMemoryBounds in a child process")
	case "bombs":
		childBombs(t)
	case "partial-frames":
		childPartialFrames(t)
	case "idle-connections":
		childIdleConnections(t)
	default:
		t.Fatalf("unknown case %q", mode)
	}
}

// procStatus reads a /proc/self/status field in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// peakMeter measures the resident set's peak from now on: VmHWM after
// resetting it (writing 5 to /proc/self/clear_refs), or where that is not
// permitted, the largest VmRSS sampled every 5 ms.
type peakMeter struct {
	t       *testing.T
	reset   bool
	stop    chan struct{}
	done    chan struct{}
	sampled int64
}

func startPeakMeter(t *testing.T) *peakMeter {
	runtime.GC()
	debug.FreeOSMemory()
	m := &peakMeter{t: t}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err == nil {
		m.reset = true
		return m
	}
	t.Logf("cannot reset VmHWM; sampling VmRSS instead")
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.done)
		for {
			m.sampled = max(m.sampled, procStatus(t, "VmRSS"))
			select {
			case <-m.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return m
}

func (m *peakMeter) peak() int64 {
	if m.reset {
		return procStatus(m.t, "VmHWM")
	}
	close(m.stop)
	<-m.done
	return m.sampled
}

const mib = 1 << 20

// bombBatch is a record batch v2 (codec 1 gzip or 3 lz4) holding one
// well-formed record whose value is valueLen zero bytes, compressed as a
// stream so that building it holds no more than the output. Well-formed,
// so that the server has to decompress it up to its limit (a batch of
// zeros would be refused at its first record).
func bombBatch(t *testing.T, codec int16, valueLen int) []byte {
	t.Helper()
	var rec []byte
	rec = append(rec, 0)             // attributes
	rec = kbin.AppendVarlong(rec, 0) // timestamp delta
	rec = kbin.AppendVarint(rec, 0)  // offset delta
	rec = kbin.AppendVarint(rec, -1) // null key
	rec = kbin.AppendVarint(rec, int32(valueLen))
	recLen := len(rec) + valueLen + 1 // + the header count
	prefix := append(kbin.AppendVarint(nil, int32(recLen)), rec...)

	var out bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case 1:
		w = gzip.NewWriter(&out)
	case 3:
		w = lz4.NewWriter(&out)
	default:
		t.Fatalf("codec %d", codec)
	}
	zeros := make([]byte, mib)
	w.Write(prefix)
	for left := valueLen; left > 0; left -= mib {
		w.Write(zeros[:min(mib, left)])
	}
	w.Write([]byte{0}) // no headers
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 61, 61+out.Len())
	b = append(b, out.Bytes()...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12)) // batch length
	b[16] = 2                                            // magic
	binary.BigEndian.PutUint16(b[21:], uint16(codec))    // attributes
	binary.BigEndian.PutUint64(b[43:], ^uint64(0))       // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)           // epoch -1
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)       // base sequence -1
	binary.BigEndian.PutUint32(b[57:], 1)                // one record
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceOnce sends one Produce v9 (acks=all) with records to addr on a
// new connection and returns the partition's error code.
func produceOnce(addr, topic string, records []byte) (int16, error) {
	nc, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 60000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	nc.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := nc.Write(frameOf(req, 1)); err != nil {
		return 0, err
	}
	br := bufio.NewReader(nc)
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return 0, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(br, frame); err != nil {
		return 0, err
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.SetVersion(9)
	r := kbin.Reader{Src: frame[4:]}
	kmsg.SkipTags(&r)
	if err := resp.ReadFrom(r.Src); err != nil {
		return 0, err
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

func childBombs(t *testing.T) {
	// `txncoord up` in-process: a coordinator and leaders 4.2, 4.2, 4.1,
	// sharing one budget of the default size.
	listeners := map[int32]net.Listener{}
	listen := func(id int32) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[id] = ln
		return ln.Addr().String()
	}
	f := &cluster.File{
		ClusterID:         "memory-test",
		Coordinator:       &cluster.Node{NodeID: 0, Addr: listen(0), KafkaVersion: "4.2"},
		DefaultPartitions: 3,
		Topics:            map[string]int32{"bombs": 1, "txns": 3},
	}
	for i, v := range []string{"4.2", "4.2", "4.1"} {
		id := int32(i + 1)
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: id, Addr: listen(id), KafkaVersion: v})
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	budget := wire.NewBudget(wire.DefaultMaxInFlightRequestBytes)
	e, err := node.StartEmbedded(node.EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: listeners,
		MarkerVersionDiscovery: true, Log: zerolog.Nop(), Limits: wire.Limits{Budget: budget}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		e.Stop(ctx)
	}()
	leader, _ := e.View.LeaderOf("bombs", 0)

	buildStart := time.Now()
	lz4Bomb := bombBatch(t, 3, 1<<30)
	gzipBomb := bombBatch(t, 1, 127*mib)
	t.Logf("bombs built in %v: lz4 %d KiB on the wire (1 GiB of zeros), gzip %d KiB (127 MiB)",
		time.Since(buildStart).Round(time.Millisecond), len(lz4Bomb)>>10, len(gzipBomb)>>10)

	// A transactional producer commits one record at a time throughout.
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.Coordinator.Addr), kgo.TransactionalID("memory-test"),
		kgo.DefaultProduceTopic("txns"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var commits []time.Time
	var produceErr error
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		for ctx.Err() == nil {
			err := cl.BeginTransaction()
			if err == nil {
				err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
				commit := kgo.TryCommit
				if err != nil {
					commit = kgo.TryAbort
				}
				if endErr := cl.EndTransaction(context.Background(), commit); err == nil {
					err = endErr
				}
			}
			mu.Lock()
			if err != nil && ctx.Err() == nil && produceErr == nil {
				produceErr = err
			}
			if err == nil {
				commits = append(commits, time.Now())
			}
			mu.Unlock()
		}
	}()
	defer func() { cancel(); <-producerDone }()
	waitFor(t, "the first commits", func() bool { mu.Lock(); defer mu.Unlock(); return len(commits) >= 20 })

	meter := startPeakMeter(t)
	base := procStatus(t, "VmRSS")
	start := time.Now()
	type result struct {
		kind string
		code int16
		err  error
	}
	results := make(chan result, 48)
	for i := range 48 {
		kind, bomb := "lz4", lz4Bomb
		if i%2 == 1 {
			kind, bomb = "gzip", gzipBomb
		}
		go func() {
			code, err := produceOnce(leader.Addr, "bombs", bomb)
			results <- result{kind, code, err}
		}()
	}
	for range 48 {
		r := <-results
		switch {
		case r.err != nil:
			t.Errorf("%s bomb: %v", r.kind, r.err)
		case r.kind == "lz4" && r.code != 2:
			t.Errorf("lz4 bomb (1 GiB): error code %d, want CORRUPT_MESSAGE (2)", r.code)
		case r.kind == "gzip" && r.code != 0:
			t.Errorf("gzip bomb (127 MiB, under the limit): error code %d, want none", r.code)
		}
	}
	end := time.Now()
	peak := meter.peak()

	mu.Lock()
	gap, inWindow := time.Duration(0), 0
	prev := start
	for _, c := range commits {
		if c.Before(start) {
			continue
		}
		if c.After(end) {
			gap = max(gap, c.Sub(prev))
			break
		}
		gap = max(gap, c.Sub(prev))
		prev = c
		inWindow++
	}
	if len(commits) == 0 || commits[len(commits)-1].Before(end) {
		gap = max(gap, end.Sub(prev))
	}
	perr := produceErr
	mu.Unlock()

	st := budget.Stats()
	t.Logf("48 bombs answered in %v; peak RSS %d MiB (%d MiB before); budget peak %d MiB of %d, %d waits; %d commits meanwhile, longest gap %v",
		end.Sub(start).Round(time.Millisecond), peak/mib, base/mib, st.Peak/mib, st.Limit/mib, st.Waits, inWindow, gap.Round(time.Millisecond))
	if peak > 1536*mib {
		t.Errorf("peak RSS %d MiB, want at most 1.5 GiB", peak/mib)
	}
	if perr != nil {
		t.Errorf("transactional producer: %v", perr)
	}
	// Other traffic goes on while the bombs are decompressed: the
	// transactional producer commits meanwhile. (How often depends on the
	// machine's load, so the longest gap is logged, not asserted.)
	if inWindow == 0 {
		t.Errorf("no transaction committed while the bombs were handled (%v)", end.Sub(start).Round(time.Millisecond))
	}
}

func childPartialFrames(t *testing.T) {
	const frameSize = wire.DefaultMaxFrameBytes
	c := clustertest.Start(t, clustertest.Options{
		Register: produceEcho,
		Tune:     func(_ cluster.Node, cfg *wire.Config) { cfg.Budget = wire.NewBudget(0) },
	})
	addr := c.Coordinator().Addr
	checkAlive(t, addr)

	meter := startPeakMeter(t)
	base := procStatus(t, "VmRSS")
	// Ten clients each send all but the last byte of a 100 MiB frame and
	// hold it; past the budget their writes block (reading paused).
	chunk := make([]byte, mib)
	var conns []net.Conn
	var sent sync.WaitGroup
	for range 10 {
		nc, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		sent.Add(1)
		go func() {
			defer sent.Done()
			frame := produceFrame(0, 1)
			binary.BigEndian.PutUint32(frame, frameSize)
			nc.Write(frame)
			for left := frameSize - 1 - (len(frame) - 4); left > 0; left -= mib {
				if _, err := nc.Write(chunk[:min(mib, left)]); err != nil {
					return
				}
			}
		}()
	}
	budget := func() wire.BudgetStats { return c.Coordinator().Server.Budget().Stats() }
	waitFor(t, "the budget full and the rest waiting", func() bool {
		st := budget()
		return st.Used >= st.Limit-frameChunk && st.Waiting >= 1
	})
	time.Sleep(2 * time.Second) // hold
	st := budget()
	peak := meter.peak()
	t.Logf("10 partial frames of 100 MiB−1 held: peak RSS growth %d MiB (%d → %d MiB); budget %d MiB used of %d, %d waiting",
		(peak-base)/mib, base/mib, peak/mib, st.Used/mib, st.Limit/mib, st.Waiting)
	if peak-base > 1<<30 {
		t.Errorf("peak RSS grew by %d MiB, want at most 1 GiB", (peak-base)/mib)
	}
	for _, nc := range conns {
		nc.Close()
	}
	sent.Wait()
	waitFor(t, "the budget empty", func() bool { return budget().Used == 0 })
	checkAlive(t, addr)
}

// frameChunk is wire's chunk for large frames (1 MiB).
const frameChunk = mib

func childIdleConnections(t *testing.T) {
	const n = 3000
	c := clustertest.Start(t, clustertest.Options{})
	addr := c.Coordinator().Addr
	// Clients as small as possible, so the growth is the server's: a
	// bare socket, the response read into one shared buffer. 1,000 from
	// each of three loopback addresses (the default per-address limit).
	req := frameOf(apiVersionsReq(3), 1)
	buf := make([]byte, 64<<10)
	connect := func(ip string) net.Conn {
		d := net.Dialer{Timeout: ioTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(ioTimeout))
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, buf[:4]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, buf[:binary.BigEndian.Uint32(buf)]); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	for _, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} { // warm up
		connect(ip).Close()
	}
	settle := func() (rss int64, ms runtime.MemStats) {
		time.Sleep(200 * time.Millisecond)
		runtime.GC()
		debug.FreeOSMemory()
		runtime.ReadMemStats(&ms)
		return procStatus(t, "VmRSS"), ms
	}
	rss0, ms0 := settle()
	conns := make([]net.Conn, 0, n)
	for i := range n {
		conns = append(conns, connect(fmt.Sprintf("127.0.0.%d", 1+i%3)))
	}
	rss1, ms1 := settle()
	goMem := int64(ms1.HeapInuse+ms1.StackInuse) - int64(ms0.HeapInuse+ms0.StackInuse)
	t.Logf("%d idle connections after ApiVersions: RSS +%d KiB (%d B per connection); Go heap+stacks +%d KiB (%d B per connection, client side included: heap %d B, stacks %d B)",
		n, (rss1-rss0)>>10, (rss1-rss0)/n, goMem>>10, goMem/n, (int64(ms1.HeapInuse)-int64(ms0.HeapInuse))/n, (int64(ms1.StackInuse)-int64(ms0.StackInuse))/n)
	if rss1-rss0 > 30e6 {
		t.Errorf("RSS grew by %d KiB for %d idle connections, want at most 30 MB", (rss1-rss0)>>10, n)
	}
	if goMem/n > 8<<10 {
		t.Errorf("%d bytes of heap and stacks per idle connection, want at most 8 KiB", goMem/n)
	}
	for _, nc := range conns {
		nc.Close()
	}
}
