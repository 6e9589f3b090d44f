package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is one connection to a Kafka node, one request at a time (as
// Kafka's inter-broker senders use one in-flight request per connection).
// It sends each request at the version set on it: choosing versions is the
// caller's job (see the negotiation package). Safe for concurrent use.
type Client struct {
	nc        net.Conn
	br        *bufio.Reader
	formatter *kmsg.RequestFormatter
	maxFrame  int32

	mu     sync.Mutex
	corr   int32
	broken error
}

// ErrClientBroken is returned for requests on a connection that already
// failed; the caller must dial again.
var ErrClientBroken = errors.New("wire: connection broken")

// Dial connects to addr. clientID is sent in every request header.
func Dial(ctx context.Context, addr, clientID string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewClient(nc, clientID), nil
}

// NewClient wraps an established connection (plain, TLS, or authenticated).
func NewClient(nc net.Conn, clientID string) *Client {
	return &Client{
		nc:        nc,
		br:        bufio.NewReader(nc),
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		maxFrame:  DefaultMaxFrameBytes,
	}
}

// Close closes the connection.
func (c *Client) Close() error { return c.nc.Close() }

// RemoteAddr is the peer's address.
func (c *Client) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Do sends req at its current version and waits for the response. The
// context's deadline bounds the whole exchange; on any I/O or decoding error
// the connection is closed and every later call fails with ErrClientBroken.
func (c *Client) Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, fmt.Errorf("%w: %v", ErrClientBroken, c.broken)
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		c.broken = err
		c.nc.Close()
	}
	return resp, err
}

func (c *Client) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	c.nc.SetDeadline(deadline)
	// A cancelled context interrupts blocked I/O.
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Now()) })
	defer stop()

	c.corr++
	corr := c.corr
	frame := c.formatter.AppendRequest(nil, req, corr)
	if _, err := c.nc.Write(frame); err != nil {
		return nil, ctxErr(ctx, err)
	}
	var sizeBuf [4]byte
	if _, err := io.ReadFull(c.br, sizeBuf[:]); err != nil {
		return nil, ctxErr(ctx, err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 4 || size > c.maxFrame {
		return nil, fmt.Errorf("wire: response frame of %d bytes", size)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(c.br, buf); err != nil {
		return nil, ctxErr(ctx, err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.Key() == 18 && len(buf) >= 6 && binary.BigEndian.Uint16(buf[4:]) == 35 {
		// KIP-511: a server that does not speak our ApiVersions
		// version answers at v0 with UNSUPPORTED_VERSION. Every
		// ApiVersions version starts with the error code, so it is
		// read before choosing the version to parse at (parsing a v0
		// body at v3 may "succeed" with garbage).
		resp.SetVersion(0)
	}
	gotCorr, err := parseResponse(buf, resp)
	if err != nil {
		return nil, err
	}
	if gotCorr != corr {
		return nil, fmt.Errorf("wire: correlation id %d, expected %d", gotCorr, corr)
	}
	return resp, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// ApiVersions asks the node which versions it supports, starting at the
// newest version kmsg knows and retrying once at the version the node's
// KIP-511 answer allows.
func (c *Client) ApiVersions(ctx context.Context) (*kmsg.ApiVersionsResponse, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(req.MaxVersion())
	req.ClientSoftwareName, req.ClientSoftwareVersion = "txncoord", "0"
	for attempt := 0; attempt < 2; attempt++ {
		raw, err := c.Do(ctx, req)
		if err != nil {
			return nil, err
		}
		resp := raw.(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 35 {
			return resp, nil
		}
		next := int16(0)
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 18 {
				next = k.MaxVersion
			}
		}
		if next >= req.GetVersion() {
			break
		}
		req.SetVersion(next)
	}
	return nil, errors.New("wire: ApiVersions: no common version")
}
