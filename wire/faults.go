package wire

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/faults"
)

// Faults injected on demand (Config.Faults, the admin API's /v1/faults):
// connections and LocalClient ask the node's faults about every decoded
// request, but only while one is set (faults.Node.Armed, one atomic load),
// so the request path pays nothing else when none is.

// faultBefore asks the node's faults about a request about to be handled:
// it waits while the node is paused or the request delayed. A non-nil
// answer replaces the handler's; drop means no answer, and the connection
// closes.
func (s *Server) faultBefore(stop <-chan struct{}, req *Request, body kmsg.Request) (d faults.Decision, answer Reply, drop bool) {
	// Shutdown ends a wait as well (draining): an in-process caller's
	// stop may never close.
	d = s.cfg.Faults.Request(stop, s.draining, req.Key)
	switch {
	case d.Stopped:
		return d, nil, true
	case d.Kind == faults.DropRequest:
		req.Logger().Warn().Uint64("fault", d.Fault).Str("reason", "injected fault").Msg("connection closed: request dropped by an injected fault")
		return d, nil, true
	case d.Kind == faults.Error:
		return d, Now(UnservedResponse(body, d.ErrorCode)), false
	}
	return d, nil, false
}

// faultAfter wraps the reply of a handled request for a DelayResponse or
// DropResponse decision: the handler's work is done (and waited for)
// either way.
func (s *Server) faultAfter(d faults.Decision, stop <-chan struct{}, reply Reply) Reply {
	switch d.Kind {
	case faults.DelayResponse:
		return func() (kmsg.Response, error) {
			resp, err := reply()
			t := time.NewTimer(d.Delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-stop:
			case <-s.draining:
			}
			return resp, err
		}
	case faults.DropResponse:
		return func() (kmsg.Response, error) {
			if _, err := reply(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("response dropped by injected fault %d", d.Fault)
		}
	}
	return reply
}
