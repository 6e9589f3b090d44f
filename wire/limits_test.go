package wire_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// produceEcho registers a Produce handler that answers every partition
// with no error, so a test can send frames of any size.
func produceEcho(_ cluster.Node, reg *wire.Registry) {
	reg.Register(0, 3, 11, func(_ context.Context, r *wire.Request) wire.Reply {
		req := r.Body.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return wire.Now(resp)
	})
}

// produceFrame is a Produce v9 request frame carrying records bytes.
func produceFrame(records int, corr int32) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "orders"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = make([]byte, records)
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return frameOf(req, corr)
}

func gather(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// A request that does not fit the budget waits, with its connection not
// read, until a request in flight is answered; the wait shows in the
// metrics. A frame larger than the whole budget is refused at its length
// prefix, as a frame over the size limit is.
func TestBudgetBackPressure(t *testing.T) {
	var logs logBuffer
	budget := wire.NewBudget(3 << 20)
	c := clustertest.Start(t, clustertest.Options{
		Log:      logs.logger(),
		Register: produceEcho,
		Tune:     func(_ cluster.Node, cfg *wire.Config) { cfg.Budget = budget },
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(wire.Collector())
	addr := c.Coordinator().Addr

	// big sends 2.5 MiB of a frame of 3 MiB − 104 bytes and holds the
	// rest: it holds all but 104 bytes of the budget (its last 1 MiB chunk
	// is charged once its first byte is read).
	const bigSize = 3<<20 - 104
	records := bigSize - (len(produceFrame(0, 1)) - 4)
	bigFrame := produceFrame(records, 1)
	bigFrame = produceFrame(records-(len(bigFrame)-4-bigSize), 1) // the length varint grew
	if len(bigFrame) != bigSize+4 {
		t.Fatalf("frame of %d bytes", len(bigFrame))
	}
	big := dialRaw(t, addr)
	big.write(bigFrame[:5<<19])
	waitFor(t, "the big frame charged", func() bool { return budget.Stats().Used == bigSize })

	// An ApiVersions request (about 40 bytes) fits; a 1 KiB Produce does
	// not, and waits.
	small := dialRaw(t, addr)
	small.roundTrip(apiVersionsReq(3), 1)
	waiter := dialRaw(t, addr)
	waiter.write(produceFrame(1000, 7))
	waitFor(t, "a request waiting for the budget", func() bool {
		return gather(t, reg, "txncoord_wire_requests_waiting_for_budget") == 1
	})
	waiter.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := waiter.br.Peek(1); err == nil {
		t.Fatal("a request that does not fit the budget was answered")
	}
	if used := gather(t, reg, "txncoord_wire_inflight_request_bytes"); used < bigSize {
		t.Fatalf("txncoord_wire_inflight_request_bytes = %v", used)
	}

	// The big frame completes and is answered: the waiter gets through.
	big.write(bigFrame[5<<19:])
	if _, err := big.readFrame(); err != nil {
		t.Fatalf("big frame: %v", err)
	}
	if _, err := waiter.readFrame(); err != nil {
		t.Fatalf("waiting request: %v", err)
	}
	waitFor(t, "the budget empty", func() bool { return budget.Stats().Used == 0 })

	// One frame larger than the whole budget could never be read.
	tooBig := dialRaw(t, addr)
	tooBig.write(produceFrame(3<<20, 9)[:64])
	tooBig.expectClosed()
	logs.waitLog(t, map[string]any{"remote": tooBig.local(), "reason": "bad frame size"})
	checkAlive(t, addr)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialFrom dials addr from a given local loopback IP.
func dialFrom(t *testing.T, ip, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: ioTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ip, err)
	}
	t.Cleanup(func() { nc.Close() })
	return newRawConn(t, nc)
}

// MaxConnsPerIP closes an address's connection past the limit at accept,
// with one log line; other addresses are not affected, and a slot frees
// when a connection ends.
func TestMaxConnsPerIP(t *testing.T) {
	var logs logBuffer
	c := clustertest.Start(t, clustertest.Options{
		Log:  logs.logger(),
		Tune: func(_ cluster.Node, cfg *wire.Config) { cfg.MaxConnsPerIP = 3 },
	})
	addr := c.Coordinator().Addr
	var conns []*rawConn
	for range 3 {
		rc := dialFrom(t, "127.0.0.1", addr)
		rc.roundTrip(apiVersionsReq(3), 1)
		conns = append(conns, rc)
	}
	fourth := dialFrom(t, "127.0.0.1", addr)
	fourth.expectClosed()
	lines := logs.lines(map[string]any{"remote": fourth.local()})
	if len(lines) != 1 || lines[0]["message"] != "connection refused: too many connections from this address" ||
		lines[0]["max_connections_per_ip"] != 3.0 {
		t.Fatalf("log lines for the fourth connection: %v", lines)
	}
	dialFrom(t, "127.0.0.2", addr).roundTrip(apiVersionsReq(3), 1) // another address

	conns[0].nc.Close()
	waitFor(t, "a freed slot", func() bool {
		rc := dialFrom(t, "127.0.0.1", addr)
		rc.write(frameOf(apiVersionsReq(3), 1))
		_, err := rc.readFrame()
		return err == nil
	})
}

// At the connection cap, a new connection closes the connection idle
// longest (idle a second or more) instead of being refused, with a log
// line; busy connections are never closed for it.
func TestIdleEvictionAtCap(t *testing.T) {
	var logs logBuffer
	c := clustertest.Start(t, clustertest.Options{
		Log:  logs.logger(),
		Tune: func(_ cluster.Node, cfg *wire.Config) { cfg.MaxConns = 2 },
	})
	addr := c.Coordinator().Addr
	oldest := dialRaw(t, addr)
	oldest.roundTrip(apiVersionsReq(3), 1)
	time.Sleep(50 * time.Millisecond)
	younger := dialRaw(t, addr)
	younger.roundTrip(apiVersionsReq(3), 1)
	time.Sleep(1100 * time.Millisecond) // both idle past evictIdleAfter

	fresh := dialRaw(t, addr)
	fresh.roundTrip(apiVersionsReq(3), 1) // admitted
	oldest.expectClosed()
	line := logs.waitLog(t, map[string]any{"remote": oldest.local(), "reason": "idle at the connection cap"})
	if line["level"] != "info" {
		t.Fatalf("eviction line %v", line)
	}
	younger.roundTrip(apiVersionsReq(3), 2) // still open

	// Now nobody has been idle for a second: the next one is refused.
	refused := dialRaw(t, addr)
	refused.expectClosed()
	logs.waitLog(t, map[string]any{"remote": refused.local(), "message": "connection refused: too many connections"})
}

// HTTP sent to a Kafka port gets one log line saying so (not a frame size
// warning) and a 400 answer naming the problem; TLS sent to a plaintext
// port gets one line too.
func TestNotKafkaOnKafkaPort(t *testing.T) {
	var logs logBuffer
	addr := startRawNode(t, &logs).Addr

	resp, err := (&http.Client{Timeout: ioTimeout}).Get("http://" + addr + "/v1/leaders")
	if err != nil {
		t.Fatalf("HTTP GET: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "Kafka protocol listener") {
		t.Fatalf("HTTP answer %d %q", resp.StatusCode, body)
	}
	want := "this listener speaks the Kafka protocol"
	waitFor(t, "the HTTP log line", func() bool { return len(logs.lines(map[string]any{"reason": "http on a kafka port"})) > 0 })
	lines := logs.lines(map[string]any{"reason": "http on a kafka port"})
	if len(lines) != 1 || !strings.HasPrefix(lines[0]["message"].(string), "HTTP request on a Kafka port from 127.0.0.1:") ||
		!strings.Contains(lines[0]["message"].(string), want) || lines[0]["level"] != "warn" {
		t.Fatalf("HTTP log lines: %v", lines)
	}
	remote := lines[0]["remote"]
	if all := logs.lines(map[string]any{"remote": remote}); len(all) != 1 {
		t.Fatalf("%d log lines for the HTTP connection, want 1: %v", len(all), all)
	}

	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: ioTimeout}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		tc.Close()
		t.Fatal("TLS handshake with a plaintext port succeeded")
	}
	waitFor(t, "the TLS log line", func() bool { return len(logs.lines(map[string]any{"reason": "tls on a plaintext port"})) == 1 })
	if n := len(logs.lines(map[string]any{"reason": "bad frame size"})); n != 0 {
		t.Fatalf("%d frame size warnings", n)
	}
	checkAlive(t, addr)
}
