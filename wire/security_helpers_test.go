package wire_test

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/cluster/clustertest"
	"github.com/txncoord/txncoord/security"
	"github.com/txncoord/txncoord/wire"
)

// secureNode is a cluster whose every node runs the security under test,
// with a WriteTxnMarkers handler guarded by wire.BrokersOnly and an
// InitProducerId handler, both recording who called them.
type secureNode struct {
	local   *security.Local
	cluster *clustertest.Cluster
	logs    *logBuffer
	calls   *principalLog
}

// principalLog records the principals the test handlers saw.
type principalLog struct {
	mu  sync.Mutex
	wtm []string // WriteTxnMarkers handler calls (only authorized ones)
	pid []string // InitProducerId handler calls
}

func (p *principalLog) snapshot() (wtm, pid []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.wtm...), append([]string(nil), p.pid...)
}

// startSecure starts the cluster with the security Settings of a fresh
// GenerateLocal, adjusted by tune (nil: TLS optional client certs + SASL).
func startSecure(t *testing.T, tune func(s *security.Settings)) *secureNode {
	t.Helper()
	local, err := security.GenerateLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(local.Settings)
	}
	sc, err := local.Settings.Server()
	if err != nil {
		t.Fatal(err)
	}
	n := &secureNode{local: local, logs: &logBuffer{}, calls: &principalLog{}}
	n.cluster = clustertest.Start(t, clustertest.Options{
		Topics: map[string]int32{"orders": 2},
		Log:    n.logs.logger(),
		Register: func(_ cluster.Node, reg *wire.Registry) {
			reg.Register(27, 1, 2, wire.BrokersOnly.Guard(func(_ context.Context, r *wire.Request) wire.Reply {
				n.calls.mu.Lock()
				n.calls.wtm = append(n.calls.wtm, r.Principal)
				n.calls.mu.Unlock()
				req := r.Body.(*kmsg.WriteTxnMarkersRequest)
				resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
				for _, m := range req.Markers {
					rm := kmsg.NewWriteTxnMarkersResponseMarker()
					rm.ProducerID = m.ProducerID
					for _, tp := range m.Topics {
						rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
						rt.Topic = tp.Topic
						for _, p := range tp.Partitions {
							rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
							rp.Partition = p
							rt.Partitions = append(rt.Partitions, rp)
						}
						rm.Topics = append(rm.Topics, rt)
					}
					resp.Markers = append(resp.Markers, rm)
				}
				return wire.Now(resp)
			}))
			reg.Register(24, 0, 5, wire.BrokersOnlyFrom(4).Guard(func(_ context.Context, r *wire.Request) wire.Reply {
				return wire.Now(r.Body.(*kmsg.AddPartitionsToTxnRequest).ResponseKind())
			}))
			reg.Register(22, 0, 5, func(_ context.Context, r *wire.Request) wire.Reply {
				n.calls.mu.Lock()
				n.calls.pid = append(n.calls.pid, r.Principal)
				n.calls.mu.Unlock()
				resp := r.Body.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ProducerID = 7
				return wire.Now(resp)
			})
		},
		Tune: func(_ cluster.Node, cfg *wire.Config) { cfg.Security = sc },
	})
	return n
}

func (n *secureNode) addr() string { return n.cluster.Coordinator().Addr }

// clientTLS trusts the local CA, optionally presenting the client
// certificate.
func (n *secureNode) clientTLS(t *testing.T, withCert bool) *tls.Config {
	t.Helper()
	cert, key := "", ""
	if withCert {
		cert, key = n.local.ClientCertFile, n.local.ClientKeyFile
	}
	cfg, err := security.ClientTLS(n.local.CAFile, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mechanism(name, user, pass string) sasl.Mechanism {
	switch name {
	case wire.MechanismPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case wire.MechanismSCRAMSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	}
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

// kgoClient is a real franz-go client with the given options.
func kgoClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(ioTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func wtmRequest() *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 42, 3, true, 1
	tp := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	tp.Topic, tp.Partitions = "orders", []int32{0, 1}
	m.Topics = append(m.Topics, tp)
	req.Markers = append(req.Markers, m)
	return req
}

// wtmCodes flattens a WriteTxnMarkers response to partition → error code.
func wtmCodes(resp *kmsg.WriteTxnMarkersResponse) map[int32]int16 {
	codes := map[int32]int16{}
	for _, m := range resp.Markers {
		for _, tp := range m.Topics {
			for _, p := range tp.Partitions {
				codes[p.Partition] = p.ErrorCode
			}
		}
	}
	return codes
}
