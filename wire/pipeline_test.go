package wire_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/wire"
)

// handlerLog remembers which correlation ids the test handler has seen.
type handlerLog struct {
	mu     sync.Mutex
	called map[int32]chan struct{}
}

func (h *handlerLog) signal(corr int32) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.called == nil {
		h.called = map[int32]chan struct{}{}
	}
	ch, ok := h.called[corr]
	if !ok {
		ch = make(chan struct{})
		h.called[corr] = ch
	}
	return ch
}

// 100 requests written before any read (ApiVersions, Metadata and a test
// InitProducerId handler, interleaved) come back in order with the right
// correlation ids. The InitProducerId replies block until the handler of
// the next InitProducerId request has run: later requests are handled
// while an earlier reply is pending, and the order still holds.
func TestPipelining100(t *testing.T) {
	var seen handlerLog
	c := clustertest.Start(t, clustertest.Options{
		Topics: map[string]int32{"orders": 3},
		Register: func(_ cluster.Node, reg *wire.Registry) {
			reg.Register(22, 0, 5, func(ctx context.Context, r *wire.Request) wire.Reply {
				close(seen.signal(r.CorrelationID))
				next := seen.signal(r.CorrelationID + 3)
				resp := r.Body.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ProducerID = int64(r.CorrelationID)
				last := r.CorrelationID+3 > 100
				return func() (kmsg.Response, error) {
					if last {
						return resp, nil
					}
					select {
					case <-next:
						return resp, nil
					case <-time.After(ioTimeout):
						return nil, errors.New("later request never handled")
					}
				}
			})
		},
	})
	conn := dialRaw(t, c.Coordinator().Addr)

	reqs := make([]kmsg.Request, 100)
	var stream []byte
	for i := range reqs {
		corr := int32(i + 1)
		switch corr % 3 {
		case 0:
			reqs[i] = apiVersionsReq(3)
		case 1:
			md := kmsg.NewPtrMetadataRequest()
			md.SetVersion(12)
			reqs[i] = md
		case 2:
			ip := kmsg.NewPtrInitProducerIDRequest()
			ip.SetVersion(4)
			ip.TransactionalID = kmsg.StringPtr(fmt.Sprintf("txn-%d", corr))
			reqs[i] = ip
		}
		stream = append(stream, frameOf(reqs[i], corr)...)
	}
	conn.write(stream) // all 100 before reading anything

	for i, req := range reqs {
		corr := int32(i + 1)
		frame, err := conn.readFrame()
		if err != nil {
			t.Fatalf("response %d: %v", corr, err)
		}
		switch resp := decodeResponse(t, frame, req, corr).(type) { // checks the id
		case *kmsg.ApiVersionsResponse:
			if resp.ErrorCode != 0 {
				t.Fatalf("corr %d: ApiVersions error %d", corr, resp.ErrorCode)
			}
		case *kmsg.MetadataResponse:
			if len(resp.Brokers) != 2 || len(resp.Topics) != 2 { // the topic and __consumer_offsets
				t.Fatalf("corr %d: metadata %d brokers, %d topics", corr, len(resp.Brokers), len(resp.Topics))
			}
		case *kmsg.InitProducerIDResponse:
			if resp.ProducerID != int64(corr) {
				t.Fatalf("corr %d: answer of request %d", corr, resp.ProducerID)
			}
		}
	}
}
