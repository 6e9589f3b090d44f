package leaderstub

// Fetch (key 1), v4–v18.
//
// Behavior:
//   - read_uncommitted reads up to the high watermark (the durable log
//     end), read_committed up to the last stable offset, and gets the
//     aborted transactions that overlap the returned range;
//   - an offset below the log start or above the high watermark is
//     OFFSET_OUT_OF_RANGE;
//   - whole batches are returned, at least one even when it is larger than
//     the byte limits (KIP-74);
//   - the request waits up to MaxWaitMillis for MinBytes: the Reply waits,
//     woken whenever a watermark moves, so the connection's reader is free;
//   - fetch sessions (KIP-227, v7+; fetch_sessions.go): a full fetch
//     creates one, incremental fetches answer only partitions that changed;
//   - a partition's record set is zero-length, never null, when it has no
//     data or an error, at every version (librdkafka refuses a null one).
//
// Version notes: v7 sessions; v11 PreferredReadReplica -1;
// v12 flexible; v13+ topics by id (unknown id → UNKNOWN_TOPIC_ID).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wire"
)

// fetchAPI is Fetch v4–v18, from v4 as Kafka 4.x advertises it.
var fetchAPI = wire.API[*Leader]{Key: 1, Min: 4, Max: 18, Handle: (*Leader).handleFetch}

// maxFetchWait caps a client's MaxWaitMillis.
const maxFetchWait = 30 * time.Second

func (l *Leader) handleFetch(ctx context.Context, r *wire.Request) wire.Reply {
	req := r.Body.(*kmsg.FetchRequest)
	version := r.Version
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
	// The session is looked up and updated now, in connection order; the
	// answer is filtered through it once the wait is over.
	fc := l.sessions.newContext(req, version)
	return func() (kmsg.Response, error) {
		deadline := time.Now().Add(wait)
		for {
			changed := l.changes()
			results, n, hasErr := l.fetchOnce(r, req, fc.targets, version)
			remaining := time.Until(deadline)
			// Nothing to read (a session error, an emptied session)
			// is answered at once, as Kafka's DelayedFetch does.
			if n >= int(req.MinBytes) || hasErr || remaining <= 0 || len(fc.targets) == 0 {
				return l.fetchResponse(req, version, fc, results), nil
			}
			timer := time.NewTimer(remaining)
			select {
			case <-changed:
			case <-timer.C:
			case <-ctx.Done():
			case <-r.Stopping: // the server is stopping: answer now
			case <-l.stop:
			}
			timer.Stop()
			if ctx.Err() != nil || l.stopped() || isClosed(r.Stopping) {
				results, _, _ := l.fetchOnce(r, req, fc.targets, version)
				return l.fetchResponse(req, version, fc, results), nil
			}
		}
	}
}

func (l *Leader) fetchResponse(req *kmsg.FetchRequest, version int16, fc *fetchContext, results []fetchResult) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(version)
	fc.respond(resp, results)
	return resp
}

func (l *Leader) stopped() bool { return isClosed(l.stop) }

// fetchOnce reads the targets from the current state; it returns their
// answers, the number of record bytes and whether a partition had an
// error. A topic the principal may not READ is TOPIC_AUTHORIZATION_FAILED.
func (l *Leader) fetchOnce(r *wire.Request, req *kmsg.FetchRequest, targets []fetchTarget, version int16) ([]fetchResult, int, bool) {
	budget := int(req.MaxBytes)
	if version < 3 || budget <= 0 {
		budget = 1 << 30
	}
	results := make([]fetchResult, 0, len(targets))
	total, hasErr := 0, false
	for _, t := range targets {
		fp := kmsg.NewFetchResponseTopicPartition()
		fp.Partition = t.key.partition
		fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset, fp.PreferredReadReplica = -1, -1, -1, -1
		// Never null: librdkafka reads the record set's length as a
		// MessageSetSize that must be >= 0 and fails the whole
		// response on -1 (kmsg writes nil as null); Kafka answers an
		// empty or failed partition with MemoryRecords.EMPTY.
		fp.RecordBatches = []byte{}
		name, topicErr := l.topicName(t.key.topic, t.key.id, version >= 13)
		switch {
		case topicErr == nil && !wire.Authorize(r, kmsg.ACLOperationRead, wire.TopicResource(name)):
			fp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case topicErr != nil:
			fp.ErrorCode = topicErr.Code
		default:
			total += l.fetchPartition(name, t, req.IsolationLevel == 1, budget-total, total == 0, &fp)
		}
		if fp.ErrorCode != 0 {
			hasErr = true
		}
		results = append(results, fetchResult{target: t, fp: fp})
	}
	return results, total, hasErr
}

// fetchPartition fills one partition's answer and returns its byte count.
func (l *Leader) fetchPartition(topic string, rp fetchTarget, readCommitted bool, budget int, first bool, fp *kmsg.FetchResponseTopicPartition) int {
	p, kerrE := l.partitionFor(topic, rp.key.partition)
	if kerrE != nil {
		fp.ErrorCode = kerrE.Code
		return 0
	}
	p.mu.RLock()
	hw, lso, logStart := p.hw, p.lso(), p.logStart
	fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = hw, lso, logStart
	if rp.offset < logStart || rp.offset > hw {
		p.mu.RUnlock()
		fp.ErrorCode = kerr.OffsetOutOfRange.Code
		return 0
	}
	upper := hw
	if readCommitted {
		upper = lso
	}
	limit := min(int(rp.maxBytes), budget)
	// Each batch's bytes: in memory until the process log's applier has
	// written them to bbolt (batchIndex.raw), then in bbolt.
	var parts []fetchedBatch
	size := 0
	end := rp.offset
	inBolt := false
	for i := p.findBatch(rp.offset); i < len(p.batches) && p.batches[i].Base < upper; i++ {
		b := p.batches[i]
		if size+int(b.Size) > limit && (size > 0 || !first) {
			break
		}
		parts = append(parts, fetchedBatch{base: b.Base, raw: b.raw})
		inBolt = inBolt || b.raw == nil
		size += int(b.Size)
		end = b.Last + 1
	}
	if readCommitted {
		fp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		for _, a := range p.aborted {
			if a.LastOffset >= rp.offset && a.FirstOffset < end {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				fp.AbortedTransactions = append(fp.AbortedTransactions, at)
			}
		}
	}
	p.mu.RUnlock()
	if len(parts) == 0 {
		return 0
	}
	out := make([]byte, 0, size)
	read := func(log *bbolt.Bucket) {
		for _, b := range parts {
			v := b.raw
			if v == nil && log != nil {
				v = log.Get(u64(b.base))
			}
			if v == nil {
				break // dropped by retention meanwhile
			}
			out = append(out, v...)
		}
	}
	if !inBolt {
		read(nil)
	} else if err := l.space.View(func(r storage.Root) error {
		var log *bbolt.Bucket
		if root := r.Bucket(bucketPartitions); root != nil {
			if pb := root.Bucket(p.key); pb != nil {
				log = pb.Bucket(bucketLog)
			}
		}
		read(log)
		return nil
	}); err != nil {
		fp.ErrorCode = kerr.KafkaStorageError.Code
		return 0
	}
	fp.RecordBatches = out
	return len(out)
}

// isClosed reports whether ch is closed (nil: never).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fetchedBatch is one batch a Fetch returns: its bytes if still in
// memory, else read from bbolt at base.
type fetchedBatch struct {
	base int64
	raw  []byte
}
