package leaderstub

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/wire"
)

// twinCoordinator is the in-memory twin of the coordinator: it answers
// AddPartitionsToTxn v4/v5 as a coordinator would (VerifyOnly: NONE when the
// partition is in the transaction, else INVALID_TXN_STATE; otherwise add
// it) and allocates producer ids.
type twinCoordinator struct {
	mu       sync.Mutex
	added    map[string]bool // txnID/topic/partition
	calls    []*kmsg.AddPartitionsToTxnRequest
	errFor   map[string]int16 // txnID → error to answer for its partitions
	nextPID  int64
	block    chan struct{} // when set, AddPartitionsToTxn waits on it
	inFlight chan struct{} // signalled when a blocked call arrived
}

func newTwin() *twinCoordinator {
	return &twinCoordinator{added: map[string]bool{}, errFor: map[string]int16{}, nextPID: 1000}
}

func (c *twinCoordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	c.mu.Lock()
	block, inFlight := c.block, c.inFlight
	c.mu.Unlock()
	if block != nil {
		if inFlight != nil {
			inFlight <- struct{}{}
		}
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, req)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Transactions {
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = t.TransactionalID
		for _, tt := range t.Topics {
			rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rtt.Topic = tt.Topic
			for _, p := range tt.Partitions {
				key := fmt.Sprintf("%s/%s/%d", t.TransactionalID, tt.Topic, p)
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition = p
				switch {
				case c.errFor[t.TransactionalID] != 0:
					rp.ErrorCode = c.errFor[t.TransactionalID]
				case t.VerifyOnly && !c.added[key]:
					rp.ErrorCode = kerr.InvalidTxnState.Code
				default:
					c.added[key] = true
				}
				rtt.Partitions = append(rtt.Partitions, rp)
			}
			rt.Topics = append(rt.Topics, rtt)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp, nil
}

func (c *twinCoordinator) InitProducerID(_ context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = c.nextPID, 0
	c.nextPID++
	return resp, nil
}

// FindCoordinator is refused: a leader's tests route nothing.
func (c *twinCoordinator) FindCoordinator(context.Context, *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error) {
	return nil, errors.New("twin coordinator: no FindCoordinator")
}

// Local is false, so the registrar batches as over TCP.
func (c *twinCoordinator) Local() bool { return false }

func (c *twinCoordinator) Close() error { return nil }

func (c *twinCoordinator) callCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// testFile is a cluster file with one coordinator and the given leaders
// (addresses may be placeholders when nothing dials them).
func testFile(leaders []cluster.Node, topics map[string]int32) *cluster.File {
	return &cluster.File{
		ClusterID:         "txncoord-test",
		Coordinator:       &cluster.Node{NodeID: 0, Addr: "127.0.0.1:1", KafkaVersion: "4.2"},
		Leaders:           leaders,
		DefaultPartitions: 1,
		Topics:            topics,
	}
}

// fixture is one leader driven by calling its handlers directly.
type fixture struct {
	t     testing.TB
	dir   string
	view  *cluster.View
	coord *twinCoordinator
	l     *Leader
	now   time.Time
	tune  func(*Config)
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, nil) }

func newFixtureWith(t testing.TB, tune func(*Config)) *fixture {
	f := &fixture{t: t, dir: t.TempDir(), coord: newTwin(), now: time.UnixMilli(1_700_000_000_000), tune: tune}
	f.view = cluster.NewView(testFile([]cluster.Node{{NodeID: 1, Addr: "127.0.0.1:2", KafkaVersion: "4.2"}}, map[string]int32{"t": 1}))
	f.open()
	t.Cleanup(func() { f.l.Close() })
	return f
}

func (f *fixture) open() {
	cfg := Config{NodeID: 1, KafkaVersion: "4.2", View: f.view, DataDir: f.dir, Coordinator: f.coord,
		Log: zerolog.Nop(), Now: func() time.Time { return f.now }}
	if f.tune != nil {
		f.tune(&cfg)
	}
	l, err := Open(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.l = l
}

func (f *fixture) restart() {
	if err := f.l.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

// call runs a handler the way the wire server does and resolves its Reply.
func (f *fixture) call(h wire.Handler, body kmsg.Request, version int16) kmsg.Response {
	f.t.Helper()
	body.SetVersion(version)
	resp, err := h(context.Background(), &wire.Request{Body: body, Key: body.Key(), Version: version, Log: zerolog.Nop()})()
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

// testBatch builds a valid uncompressed record batch v2.
type testBatch struct {
	pid     int64
	epoch   int16
	seq     int32
	txn     bool
	count   int
	ts      int64
	payload string
}

func (b testBatch) bytes() []byte {
	if b.count == 0 {
		b.count = 1
	}
	var recs []byte
	for i := 0; i < b.count; i++ {
		var rec []byte
		rec = append(rec, 0)
		rec = kbin.AppendVarlong(rec, 0)
		rec = kbin.AppendVarint(rec, int32(i))
		rec = kbin.AppendVarint(rec, -1) // null key
		v := []byte(fmt.Sprintf("%s-%d", b.payload, i))
		rec = kbin.AppendVarint(rec, int32(len(v)))
		rec = append(rec, v...)
		rec = kbin.AppendVarint(rec, 0)
		recs = kbin.AppendVarint(recs, int32(len(rec)))
		recs = append(recs, rec...)
	}
	out := make([]byte, batchHeaderLen, batchHeaderLen+len(recs))
	out = append(out, recs...)
	binary.BigEndian.PutUint32(out[offBatchLength:], uint32(len(out)-12))
	out[offMagic] = 2
	var attrs uint16
	if b.txn {
		attrs |= attrTransactional
	}
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	binary.BigEndian.PutUint32(out[offLastOffsetDelta:], uint32(b.count-1))
	binary.BigEndian.PutUint64(out[offBaseTimestamp:], uint64(b.ts))
	binary.BigEndian.PutUint64(out[offMaxTimestamp:], uint64(b.ts))
	binary.BigEndian.PutUint64(out[offProducerID:], uint64(b.pid))
	binary.BigEndian.PutUint16(out[offProducerEpoch:], uint16(b.epoch))
	binary.BigEndian.PutUint32(out[offBaseSequence:], uint32(b.seq))
	binary.BigEndian.PutUint32(out[offRecordCount:], uint32(b.count))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], crc32c))
	return out
}

// produceReq is a one-partition Produce request.
func produceReq(topic string, partition int32, txnID *string, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = txnID, acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// markerReq is a one-partition WriteTxnMarkers request.
func markerReq(pid int64, epoch int16, commit bool, coordEpoch int32, tv int8, topic string, partition int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = pid, epoch, commit, coordEpoch, tv
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return fmt.Sprintf("%s(%d)", ke.Message, code)
		}
	}
	return fmt.Sprintf("code(%d)", code)
}

// waitFor polls cond until it holds (no sleeps as synchronization).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
