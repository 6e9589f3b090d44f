package faultproxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Replay sends a captured request again, unchanged (same header version and
// correlation id), on a new connection straight to the proxy's target, and
// returns the decoded response. This is how a test delivers a late marker:
// Kafka needs no ApiVersions exchange first.
func (p *Proxy) Replay(ctx context.Context, c Captured) (kmsg.Response, error) {
	return ReplayTo(ctx, p.cfg.Target, c)
}

// ReplayTo is Replay to any address. A request that has no response (a
// Produce with acks=0) waits until ctx is done.
func ReplayTo(ctx context.Context, addr string, c Captured) (kmsg.Response, error) {
	if len(c.Frame) < 12 {
		return nil, fmt.Errorf("%w: captured frame of %d bytes", errBadFrame, len(c.Frame))
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: replay dial %s: %w", addr, err)
	}
	defer nc.Close()
	// A cancelled context interrupts the blocked write or read.
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	if _, err := nc.Write(c.Frame); err != nil {
		return nil, replayErr(ctx, err)
	}
	frame, err := readFrame(nc, 4)
	if err != nil {
		return nil, replayErr(ctx, err)
	}
	if corr := responseCorrelationID(frame); corr != c.CorrelationID {
		return nil, fmt.Errorf("%w: response correlation id %d, sent %d", errBadFrame, corr, c.CorrelationID)
	}
	return decodeResponse(frame, c.Key, c.Version)
}

func replayErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("faultproxy: replay: %w (%v)", ctx.Err(), err)
	}
	return fmt.Errorf("faultproxy: replay: %w", err)
}

// WithRequest is c with its body replaced by req (of the same key, at c's
// version), under the same request header: how a test replays part of a
// captured request, say one producer's markers of a WriteTxnMarkers that
// carried several. The header is what precedes the body in c.Frame, so c's
// decoded body must encode back to the bytes it was read from.
func (c Captured) WithRequest(req kmsg.Request) (Captured, error) {
	if c.Request == nil || req.Key() != c.Key {
		return Captured{}, fmt.Errorf("faultproxy: WithRequest: a %s for a captured key %d request", kmsg.NameForKey(req.Key()), c.Key)
	}
	c.Request.SetVersion(c.Version)
	old := c.Request.AppendTo(nil)
	if len(c.Frame) < 4+len(old) || !bytes.Equal(c.Frame[len(c.Frame)-len(old):], old) {
		return Captured{}, fmt.Errorf("faultproxy: WithRequest: the captured body does not encode back to its frame")
	}
	header := c.Frame[4 : len(c.Frame)-len(old)]
	req.SetVersion(c.Version)
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = append(frame, header...)
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	c.Frame, c.Request, c.DecodeErr = frame, req, nil
	return c, nil
}
