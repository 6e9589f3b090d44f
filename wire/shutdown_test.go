package wire_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// slowHandler registers InitProducerId with a Reply that waits for release
// (or for the server's context, cancelled when Shutdown gives up).
type slowHandler struct {
	entered chan struct{}
	release chan struct{}
}

func newSlowHandler() *slowHandler {
	return &slowHandler{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (s *slowHandler) register(_ cluster.Node, reg *wire.Registry) {
	reg.Register(22, 0, 5, func(ctx context.Context, r *wire.Request) wire.Reply {
		s.entered <- struct{}{}
		resp := r.Body.(*kmsg.InitProducerIDRequest).ResponseKind()
		return func() (kmsg.Response, error) {
			select {
			case <-s.release:
				return resp, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	})
}

func initPIDReq() *kmsg.InitProducerIDRequest {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID = kmsg.StringPtr("slow")
	return req
}

func waitEntered(t *testing.T, s *slowHandler) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(ioTimeout):
		t.Fatal("handler never called")
	}
}

// Graceful shutdown stops accepting at once, then lets an in-flight slow
// Reply finish and sends its response before the server stops.
func TestShutdownFinishesInFlight(t *testing.T) {
	slow := newSlowHandler()
	c := clustertest.Start(t, clustertest.Options{Register: slow.register})
	node := c.Coordinator()
	conn := dialRaw(t, node.Addr)
	conn.write(frameOf(initPIDReq(), 42))
	waitEntered(t, slow)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		done <- node.Server.Shutdown(ctx)
	}()
	// The listener closes: poll until a new dial is refused.
	for attempt := 0; ; attempt++ {
		nc, err := net.DialTimeout("tcp", node.Addr, ioTimeout)
		if err != nil {
			break
		}
		nc.Close()
		if attempt == 1000 {
			t.Fatal("still accepting connections during shutdown")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a reply was in flight", err)
	default:
	}
	close(slow.release)
	frame, err := conn.readFrame()
	if err != nil {
		t.Fatalf("in-flight response lost: %v", err)
	}
	decodeResponse(t, frame, initPIDReq(), 42)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	conn.expectClosed()
}

// Past its deadline, Shutdown cancels the handlers' context and closes
// every connection; the slow request gets no response.
func TestShutdownForcesAfterDeadline(t *testing.T) {
	slow := newSlowHandler()
	c := clustertest.Start(t, clustertest.Options{Register: slow.register})
	node := c.Coordinator()
	conn := dialRaw(t, node.Addr)
	conn.write(frameOf(initPIDReq(), 1))
	waitEntered(t, slow)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := node.Server.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
	conn.expectClosed()
}

// A long-poll Reply that watches Request.Stopping answers as soon as
// Shutdown begins, so a graceful stop does not wait out the poll.
func TestShutdownEndsLongPolls(t *testing.T) {
	entered := make(chan struct{}, 1)
	c := clustertest.Start(t, clustertest.Options{Register: func(_ cluster.Node, reg *wire.Registry) {
		reg.Register(22, 0, 5, func(ctx context.Context, r *wire.Request) wire.Reply {
			entered <- struct{}{}
			resp := r.Body.(*kmsg.InitProducerIDRequest).ResponseKind()
			return func() (kmsg.Response, error) {
				select {
				case <-r.Stopping:
					return resp, nil
				case <-time.After(time.Hour):
					return nil, errors.New("long poll not ended by Shutdown")
				}
			}
		})
	}})
	node := c.Coordinator()
	conn := dialRaw(t, node.Addr)
	conn.write(frameOf(initPIDReq(), 7))
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if err := node.Server.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	frame, err := conn.readFrame()
	if err != nil {
		t.Fatalf("long-poll response lost: %v", err)
	}
	decodeResponse(t, frame, initPIDReq(), 7)
}
