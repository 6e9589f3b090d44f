package faultproxy

import (
	"context"
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
