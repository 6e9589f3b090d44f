package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
)

// The raw driver: many transactional ids over a few kgo clients, each id's
// transaction issued as the requests a TV2 producer sends (kgo's own
// transactional producer is one client per id, whose goroutines,
// connections and CPU bound how many ids one machine can drive):
//
//   - FindCoordinator (key type 1) for many ids in one request (KIP-699),
//     again for an id whose coordinator answers NOT_COORDINATOR or
//     cannot be reached;
//   - InitProducerId once per id (and after a fatal error, with the id's
//     producer id and epoch, so the coordinator bumps them: KIP-360);
//   - per transaction, Produce v12+ with the transactional id to the
//     leader of each partition, one transactional batch each at sequence
//     0: TV2 (KIP-890) bumps the epoch at every EndTxn, and sequences start
//     again at a new epoch; the leader registers the partition with the
//     coordinator itself;
//   - EndTxn v5 commit, whose answer carries the epoch of the next
//     transaction.
//
// A node answers the requests of one connection in order (as Kafka does),
// so a request held up at a dead coordinator (an EndTxn, or a Produce whose
// leader registers the partition with it) holds up every answer queued
// behind it on that connection. The ids therefore go to the clients by
// their __transaction_state partition: with as many clients as partitions
// (the default), the ids sharing a connection share a coordinator, and a
// coordinator's death holds up only its own ids, as with a client per id.
// FindCoordinator has a client of its own for the same reason.
//
// Retriable errors (the coordinator moving, the previous transaction's
// markers not yet written) are retried with a growing backoff until the
// transaction's deadline, as kgo retries them.

// rawTxnWithin bounds one transaction of the raw driver, retries included.
const rawTxnWithin = 30 * time.Second

// rawFindBatch is how many ids one FindCoordinator asks for.
const rawFindBatch = 1000

// rawDriver drives cfg.IDs transactional ids over its clients.
type rawDriver struct {
	clients []*kgo.Client // the last one is the finder's
	topic   string
	topicID [16]byte
	leader  map[int32]int32 // partition → leader node
	parts   [][]int32
	value   []byte
	find    *coordFinder
	ids     []rawID
}

// rawID is one transactional id's producer state; only its own goroutine
// (pacedLoop's) touches it.
type rawID struct {
	name  string
	cl    *kgo.Client
	pid   int64
	epoch int16 // -1 before InitProducerId
}

func newRawDriver(ctx context.Context, seeds []string, cfg ScaleConfig, parts [][]int32, value []byte) (*rawDriver, error) {
	n := max(1, cfg.RawClients)
	d := &rawDriver{topic: cfg.Topic, parts: parts, value: value, leader: map[int32]int32{}}
	for range n + 1 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			d.close()
			return nil, err
		}
		d.clients = append(d.clients, cl)
	}
	meta := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(cfg.Topic)
	meta.Topics = append(meta.Topics, rt)
	// Each client learns every node (coordinators too) from Metadata, so
	// that Broker(node) reaches the one FindCoordinator names.
	var resp *kmsg.MetadataResponse
	for _, cl := range d.clients {
		r, err := meta.RequestWith(ctx, cl)
		if err != nil {
			d.close()
			return nil, err
		}
		resp = r
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != cfg.Topic {
			continue
		}
		d.topicID = t.TopicID
		for _, p := range t.Partitions {
			d.leader[p.Partition] = p.Leader
		}
	}
	if len(d.leader) == 0 {
		d.close()
		return nil, fmt.Errorf("raw driver: topic %s not in metadata", cfg.Topic)
	}
	// The driver sends what a TV2 producer sends, which a client does only
	// when the cluster has finalized transaction.version 2 (kgo checks the
	// same before it uses Produce v12 and EndTxn v5).
	if err := requireTV2(ctx, d.clients[0]); err != nil {
		d.close()
		return nil, err
	}
	// The leaders answer FindCoordinator for the cluster and are never
	// killed, so lookups go to them.
	var askAt []int32
	for _, b := range resp.Brokers {
		for _, l := range d.leader {
			if l == b.NodeID {
				askAt = append(askAt, b.NodeID)
				break
			}
		}
	}
	d.find = &coordFinder{cl: d.clients[n], askAt: askAt, node: map[string]int32{}, waiting: map[string][]chan error{}}
	d.ids = make([]rawID, cfg.IDs)
	names := make([]string, cfg.IDs)
	for i := range d.ids {
		names[i] = fmt.Sprintf("%s-id-%d", cfg.Prefix, i)
		p := cluster.TransactionPartitionFor(names[i], cfg.TxnStatePartitions)
		d.ids[i] = rawID{name: names[i], cl: d.clients[int(p)%n], pid: -1, epoch: -1}
	}
	for start := 0; start < len(names); start += rawFindBatch {
		if err := d.find.lookup(ctx, names[start:min(len(names), start+rawFindBatch)]); err != nil {
			d.close()
			return nil, err
		}
	}
	return d, nil
}

// requireTV2 fails unless ApiVersions finalizes transaction.version >= 2.
func requireTV2(ctx context.Context, cl *kgo.Client) error {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" && f.MaxVersionLevel >= 2 {
			return nil
		}
	}
	return fmt.Errorf("raw driver: the cluster has not finalized transaction.version 2 (ApiVersions v%d features %+v)",
		resp.Version, resp.FinalizedFeatures)
}

func (d *rawDriver) close() {
	for _, cl := range d.clients {
		cl.Close()
	}
}

// op is id i's transaction, for pacedLoop.
func (d *rawDriver) op(ctx context.Context, i int) func() (bool, error) {
	return func() (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, rawTxnWithin)
		defer cancel()
		return true, d.txn(ctx, &d.ids[i], d.parts[i])
	}
}

func (d *rawDriver) txn(ctx context.Context, id *rawID, parts []int32) error {
	if id.epoch < 0 {
		if err := d.initProducerID(ctx, id); err != nil {
			return fmt.Errorf("init producer id: %w", err)
		}
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { errs[i] = d.produce(ctx, id, p) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if aerr := d.endTxn(ctx, id, false); aerr != nil {
			id.epoch = -1
		}
		return fmt.Errorf("produce: %w", err)
	}
	if err := d.endTxn(ctx, id, true); err != nil {
		id.epoch = -1
		return fmt.Errorf("end transaction: %w", err)
	}
	return nil
}

func (d *rawDriver) initProducerID(ctx context.Context, id *rawID) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr(id.name)
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID, req.ProducerEpoch = id.pid, -1
	if id.pid >= 0 {
		req.ProducerEpoch = id.epoch
	}
	var resp *kmsg.InitProducerIDResponse
	err := d.toCoordinator(ctx, id, req, func(r kmsg.Response) int16 {
		resp = r.(*kmsg.InitProducerIDResponse)
		return resp.ErrorCode
	})
	if err != nil {
		// A fenced or unknown bump starts over with a fresh producer id.
		id.pid, id.epoch = -1, -1
		return err
	}
	id.pid, id.epoch = resp.ProducerID, resp.ProducerEpoch
	return nil
}

func (d *rawDriver) endTxn(ctx context.Context, id *rawID, commit bool) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id.name, id.pid, id.epoch, commit
	var resp *kmsg.EndTxnResponse
	err := d.toCoordinator(ctx, id, req, func(r kmsg.Response) int16 {
		resp = r.(*kmsg.EndTxnResponse)
		return resp.ErrorCode
	})
	if err != nil {
		return err
	}
	if resp.Version < 5 {
		return fmt.Errorf("EndTxn v%d: the raw driver needs v5 (TV2)", resp.Version)
	}
	id.pid, id.epoch = resp.ProducerID, resp.ProducerEpoch
	return nil
}

// coordinatorMoved are the answers after which an id's coordinator is
// looked up again.
func coordinatorMoved(code int16) bool {
	return code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code ||
		code == kerr.CoordinatorLoadInProgress.Code
}

// toCoordinator sends req to id's coordinator until it answers something
// other than a retriable error (code reads a response's error code) or ctx
// ends.
func (d *rawDriver) toCoordinator(ctx context.Context, id *rawID, req kmsg.Request, code func(kmsg.Response) int16) error {
	var b backoff
	for {
		node, err := d.find.coordinator(ctx, id.name)
		if err == nil {
			var resp kmsg.Response
			if resp, err = id.cl.Broker(int(node)).Request(ctx, req); err != nil {
				d.find.forget(id.name, node) // its process may be gone
			} else if c := code(resp); c == 0 {
				return nil
			} else {
				err = kerr.ErrorForCode(c)
				if coordinatorMoved(c) {
					d.find.forget(id.name, node)
				} else if !kerr.IsRetriable(err) && c != kerr.ConcurrentTransactions.Code {
					return err
				}
			}
		}
		if !b.wait(ctx) {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}

// produce writes one transactional batch to partition p at its leader.
func (d *rawDriver) produce(ctx context.Context, id *rawID, p int32) error {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = kmsg.StringPtr(id.name)
	req.Acks, req.TimeoutMillis = -1, 30_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = d.topic, d.topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = txnBatch(id.pid, id.epoch, 0, time.Now().UnixMilli(), d.value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var b backoff
	for {
		resp, err := id.cl.Broker(int(d.leader[p])).Request(ctx, req)
		if err == nil {
			pr := resp.(*kmsg.ProduceResponse)
			if pr.Version < 12 {
				return fmt.Errorf("produce v%d: the raw driver needs v12+ (TV2)", pr.Version)
			}
			code := int16(-1)
			for _, t := range pr.Topics {
				for _, pp := range t.Partitions {
					code = pp.ErrorCode
				}
			}
			switch {
			case code == 0 || code == kerr.DuplicateSequenceNumber.Code:
				return nil
			case code == -1:
				err = fmt.Errorf("produce response without partition %d", p)
			default:
				err = kerr.ErrorForCode(code)
				if !kerr.IsRetriable(err) && code != kerr.ConcurrentTransactions.Code {
					return err
				}
			}
		}
		if !b.wait(ctx) {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}

// backoff waits 10 ms, doubling to 500 ms, between retries.
type backoff struct{ next time.Duration }

func (b *backoff) wait(ctx context.Context) bool {
	b.next = min(max(2*b.next, 10*time.Millisecond), 500*time.Millisecond)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(b.next):
		return true
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// txnBatch is a record batch (magic 2) of one record with value,
// transactional, of producer pid at epoch from sequence seq.
func txnBatch(pid int64, epoch int16, seq int32, ts int64, value []byte) []byte {
	var rec []byte
	rec = append(rec, 0)             // attributes
	rec = kbin.AppendVarlong(rec, 0) // timestamp delta
	rec = kbin.AppendVarint(rec, 0)  // offset delta
	rec = kbin.AppendVarint(rec, -1) // null key
	rec = kbin.AppendVarint(rec, int32(len(value)))
	rec = append(rec, value...)
	rec = kbin.AppendVarint(rec, 0) // no headers

	b := make([]byte, 0, 61+len(rec)+5)
	b = kbin.AppendInt64(b, 0)  // base offset
	b = kbin.AppendInt32(b, 0)  // batch length, below
	b = kbin.AppendInt32(b, -1) // partition leader epoch
	b = append(b, 2)            // magic
	b = kbin.AppendInt32(b, 0)  // CRC, below
	b = kbin.AppendInt16(b, 0x10)
	b = kbin.AppendInt32(b, 0) // last offset delta
	b = kbin.AppendInt64(b, ts)
	b = kbin.AppendInt64(b, ts)
	b = kbin.AppendInt64(b, pid)
	b = kbin.AppendInt16(b, epoch)
	b = kbin.AppendInt32(b, seq)
	b = kbin.AppendInt32(b, 1) // records
	b = kbin.AppendVarint(b, int32(len(rec)))
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// coordFinder keeps each id's transaction coordinator, looked up for many
// ids at once: the lookups asked for within coordFindLinger ride one
// FindCoordinator.
type coordFinder struct {
	cl    *kgo.Client
	askAt []int32
	mu    sync.Mutex
	node  map[string]int32
	// waiting are the ids to look up next, each with its callers.
	waiting map[string][]chan error
	asked   int
}

// coordFindLinger is how long a lookup waits for others to join it.
const coordFindLinger = 5 * time.Millisecond

func (f *coordFinder) coordinator(ctx context.Context, id string) (int32, error) {
	f.mu.Lock()
	if n, ok := f.node[id]; ok {
		f.mu.Unlock()
		return n, nil
	}
	ch := make(chan error, 1)
	first := len(f.waiting) == 0
	f.waiting[id] = append(f.waiting[id], ch)
	f.mu.Unlock()
	if first {
		time.AfterFunc(coordFindLinger, func() { f.flush(ctx) })
	}
	select {
	case err := <-ch:
		if err != nil {
			return 0, err
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.node[id]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("no coordinator known for %s", id)
}

// forget drops id's coordinator if it is still node.
func (f *coordFinder) forget(id string, node int32) {
	f.mu.Lock()
	if n, ok := f.node[id]; ok && n == node {
		delete(f.node, id)
	}
	f.mu.Unlock()
}

func (f *coordFinder) flush(ctx context.Context) {
	f.mu.Lock()
	waiting := f.waiting
	f.waiting = map[string][]chan error{}
	f.mu.Unlock()
	ids := make([]string, 0, len(waiting))
	for id := range waiting {
		ids = append(ids, id)
	}
	for start := 0; start < len(ids); start += rawFindBatch {
		batch := ids[start:min(len(ids), start+rawFindBatch)]
		err := f.lookup(ctx, batch)
		for _, id := range batch {
			for _, ch := range waiting[id] {
				ch <- err
			}
		}
	}
}

// lookup asks one FindCoordinator for ids and keeps the answers; an id
// answered with an error stays unknown.
func (f *coordFinder) lookup(ctx context.Context, ids []string) error {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKeys = ids
	f.mu.Lock()
	at := f.askAt[f.asked%len(f.askAt)]
	f.asked++
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := f.cl.Broker(int(at)).Request(ctx, req)
	if err != nil {
		return err
	}
	fc := resp.(*kmsg.FindCoordinatorResponse)
	if fc.Version < 4 {
		return fmt.Errorf("FindCoordinator v%d: the raw driver needs v4+ (batched keys)", fc.Version)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range fc.Coordinators {
		if c.ErrorCode == 0 {
			f.node[c.Key] = c.NodeID
		}
	}
	return nil
}
