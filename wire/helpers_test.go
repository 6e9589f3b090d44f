package wire_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/internal/logtest"
	"github.com/txncoord/txncoord/wire"
)

// ioTimeout bounds every blocking socket operation of a test, so a bug
// fails the test instead of hanging it. It is never what a test waits for.
const ioTimeout = 10 * time.Second

// logBuffer collects a server's JSON log lines for assertions.
type logBuffer struct{ logtest.Buffer }

func (b *logBuffer) logger() zerolog.Logger { return b.Logger() }

// lines returns the log lines whose fields include every key/value of want.
func (b *logBuffer) lines(want map[string]any) []map[string]any { return b.Lines(want) }

// waitLog polls until a log line matches; the server writes it from its
// own goroutine, possibly just after the client saw the close.
func (b *logBuffer) waitLog(t *testing.T, want map[string]any) map[string]any {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for time.Now().Before(deadline) {
		if l := b.lines(want); len(l) > 0 {
			return l[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no log line with %v", want)
	return nil
}

// rawConn is a test's own end of a connection: hand-built frames in,
// frames out.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return newRawConn(t, nc)
}

func newRawConn(t testing.TB, nc net.Conn) *rawConn {
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) local() string { return c.nc.LocalAddr().String() }

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame (without its length prefix).
func (c *rawConn) readFrame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.br, frame)
	return frame, err
}

// roundTrip sends req at its version and decodes the response into a new
// response of that version, checking the correlation id.
func (c *rawConn) roundTrip(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	c.write(frameOf(req, corr))
	frame, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read response to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return decodeResponse(c.t, frame, req, corr)
}

// expectClosed asserts that the server closes the connection: a read ends
// with EOF or a reset, not with the test's own timeout, and no response
// comes first.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	n, err := c.br.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		c.t.Fatalf("server sent data instead of closing the connection")
	case errors.As(err, &ne) && ne.Timeout():
		c.t.Fatalf("connection still open after %v", ioTimeout)
	case err == nil:
		c.t.Fatalf("read returned nothing and no error")
	}
}

func frameOf(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, req, corr)
}

// decodeResponse parses a response frame as the response of req: header v1
// (a tag section) for flexible responses except ApiVersions.
func decodeResponse(t testing.TB, frame []byte, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	if len(frame) < 4 {
		t.Fatalf("response frame of %d bytes", len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func apiVersionsReq(v int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(v)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw-test", "0"
	return req
}

// checkAlive opens a new connection and asserts that ApiVersions works.
func checkAlive(t *testing.T, addr string) {
	t.Helper()
	c := dialRaw(t, addr)
	resp := c.roundTrip(apiVersionsReq(3), 1).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions on a new connection: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	c.nc.Close()
}

// startInitPID starts a cluster whose nodes answer InitProducerId (key 22,
// v0–v5) with h; log gets every node's logs (zero: discarded).
func startInitPID(t *testing.T, log zerolog.Logger, h wire.Handler) *clustertest.Cluster {
	t.Helper()
	return clustertest.Start(t, clustertest.Options{Log: log, Register: func(_ cluster.Node, reg *wire.Registry) {
		reg.Register(22, 0, 5, h)
	}})
}

// buggyInitPID is an InitProducerId handler with the bug its transactional
// id names: "panic" (the handler), "reply-panic", "reply-error",
// "wrong-type" (an EndTxn response), "nil-reply"; any other id gets
// producer id 9.
func buggyInitPID(_ context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	switch *req.TransactionalID {
	case "panic":
		panic("handler bug")
	case "reply-panic":
		return func() (kmsg.Response, error) { panic("reply bug") }
	case "reply-error":
		return wire.Fail(errors.New("reply failed"))
	case "wrong-type":
		return wire.Now(kmsg.NewPtrEndTxnResponse())
	case "nil-reply":
		return nil
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID = 9
	return wire.Now(resp)
}
