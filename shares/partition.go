package shares

import (
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Acknowledge types (ShareFetch / ShareAcknowledge AcknowledgeTypes).
const (
	AckGap     int8 = 0 // the offset holds no record for the client (archived)
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4 // v2 (KIP-1222): extend the acquisition lock
)

// inFlight is one record of the window that is not finished.
type inFlight struct {
	acquired bool
	member   string
	count    int16 // deliveries so far
	expires  time.Time
}

// Partition is one share partition's state.
type Partition struct {
	start int64 // SPSO: every record below it is finished
	end   int64 // one past the last offset the window reached
	recs  map[int64]*inFlight
}

// New is a share partition starting at offset start.
func New(start int64) *Partition {
	return &Partition{start: start, end: start, recs: map[int64]*inFlight{}}
}

// Start is the share-partition start offset.
func (p *Partition) Start() int64 { return p.start }

// End is one past the last offset the window has reached.
func (p *Partition) End() int64 { return p.end }

// Counts are the records in flight: acquired, and available again.
func (p *Partition) Counts() (acquired, available int) {
	for _, r := range p.recs {
		if r.acquired {
			acquired++
		} else {
			available++
		}
	}
	return acquired, available
}

// Span is a run of offsets of the log at or after End, as the leader
// reads it: Skip spans (control batches, aborted transactions under
// read_committed) are archived without delivery; offsets between spans
// hold no record.
type Span struct {
	First, Last int64
	Skip        bool
}

// Acquired is a run of offsets acquired by one fetch with one delivery
// count (ShareFetch AcquiredRecords).
type Acquired struct {
	First, Last   int64
	DeliveryCount int16
}

// Truncate moves the start up to logStart when retention removed the
// records below it.
func (p *Partition) Truncate(logStart int64) {
	if p.start >= logStart {
		return
	}
	for o := range p.recs {
		if o < logStart {
			delete(p.recs, o)
		}
	}
	p.start = logStart
	p.end = max(p.end, logStart)
	p.advance()
}

// Acquire gives member up to maxRecords records under a lock of
// cfg.LockDuration: first those available again inside the window, in
// offset order, then new ones from spans (which start at or after End).
// A record already delivered cfg.DeliveryCountLimit times is archived
// instead. The window grows only while it holds fewer than
// cfg.MaxRecordLocks offsets.
func (p *Partition) Acquire(now time.Time, member string, spans []Span, maxRecords int, cfg Config) []Acquired {
	p.Expire(now, cfg)
	var out []Acquired
	take := func(o int64, r *inFlight) {
		r.acquired, r.member, r.expires = true, member, now.Add(cfg.LockDuration)
		r.count++
		if n := len(out); n > 0 && out[n-1].Last == o-1 && out[n-1].DeliveryCount == r.count {
			out[n-1].Last = o
		} else {
			out = append(out, Acquired{First: o, Last: o, DeliveryCount: r.count})
		}
		maxRecords--
	}
	for _, o := range slices.Sorted(maps.Keys(p.recs)) {
		if maxRecords <= 0 {
			break
		}
		r := p.recs[o]
		if r.acquired {
			continue
		}
		if r.count >= cfg.DeliveryCountLimit {
			delete(p.recs, o)
			continue
		}
		take(o, r)
	}
	for _, s := range spans {
		if maxRecords <= 0 || p.end-p.start >= int64(cfg.MaxRecordLocks) {
			break
		}
		if s.Last < p.end {
			continue
		}
		p.end = max(p.end, s.First)
		if s.Skip {
			p.end = s.Last + 1
			continue
		}
		for ; p.end <= s.Last && maxRecords > 0 && p.end-p.start < int64(cfg.MaxRecordLocks); p.end++ {
			r := &inFlight{}
			p.recs[p.end] = r
			take(p.end, r)
		}
	}
	p.advance()
	return out
}

// release makes an acquired record available again, or archives it once
// it reached the delivery count limit.
func (p *Partition) release(o int64, r *inFlight, cfg Config) {
	if r.count >= cfg.DeliveryCountLimit {
		delete(p.recs, o)
		return
	}
	r.acquired, r.member, r.expires = false, "", time.Time{}
}

// Expire releases every record whose lock expired by now; it reports
// whether any did.
func (p *Partition) Expire(now time.Time, cfg Config) bool {
	changed := false
	for o, r := range p.recs {
		if r.acquired && !now.Before(r.expires) {
			p.release(o, r, cfg)
			changed = true
		}
	}
	if changed {
		p.advance()
	}
	return changed
}

// NextExpiry is the earliest lock expiry (zero: none).
func (p *Partition) NextExpiry() time.Time {
	var next time.Time
	for _, r := range p.recs {
		if r.acquired && (next.IsZero() || r.expires.Before(next)) {
			next = r.expires
		}
	}
	return next
}

// ReleaseMember releases every record member holds (it left the group,
// was fenced, or closed its share session); it reports whether any was.
func (p *Partition) ReleaseMember(member string, cfg Config) bool {
	changed := false
	for o, r := range p.recs {
		if r.acquired && r.member == member {
			p.release(o, r, cfg)
			changed = true
		}
	}
	if changed {
		p.advance()
	}
	return changed
}

// AckBatch is one acknowledgement batch: one type for the whole range, or
// one per offset.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// Ack applies member's acknowledgements, all or none: INVALID_REQUEST for
// a malformed batch (unordered, overlapping, a type count that fits
// neither form, an unknown type, Renew unless renew is allowed, a range
// past the window), INVALID_RECORD_STATE for a record the member does not
// hold. It returns the error code (0: applied).
func (p *Partition) Ack(now time.Time, member string, batches []AckBatch, renew bool, cfg Config) int16 {
	maxType := AckReject
	if renew {
		maxType = AckRenew
	}
	prevEnd := int64(-1)
	for _, b := range batches {
		if b.First > b.Last || b.First <= prevEnd || len(b.Types) == 0 ||
			(len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1) {
			return kerr.InvalidRequest.Code
		}
		for _, t := range b.Types {
			if t < 0 || t > maxType {
				return kerr.InvalidRequest.Code
			}
		}
		if b.Last >= p.end {
			return kerr.InvalidRequest.Code
		}
		prevEnd = b.Last
	}
	for _, b := range batches {
		for o := max(b.First, p.start); o <= b.Last; o++ {
			if typeAt(b, o) == AckGap {
				continue
			}
			if r, ok := p.recs[o]; !ok || !r.acquired || r.member != member {
				return kerr.InvalidRecordState.Code
			}
		}
	}
	for _, b := range batches {
		for o := max(b.First, p.start); o <= b.Last; o++ {
			r, ok := p.recs[o]
			if !ok || !r.acquired || r.member != member {
				continue // a gap over a finished offset
			}
			switch typeAt(b, o) {
			case AckGap, AckAccept, AckReject:
				delete(p.recs, o)
			case AckRelease:
				p.release(o, r, cfg)
			case AckRenew:
				r.expires = now.Add(cfg.LockDuration)
			}
		}
	}
	p.advance()
	return 0
}

func typeAt(b AckBatch, o int64) int8 {
	if len(b.Types) == 1 {
		return b.Types[0]
	}
	return b.Types[o-b.First]
}

// Reset moves the start offset to offset, forgetting every record in
// flight (AlterShareGroupOffsets, on a group with no members).
func (p *Partition) Reset(offset int64) {
	clear(p.recs)
	p.start, p.end = offset, offset
}

// advance moves the start past finished offsets.
func (p *Partition) advance() {
	for p.start < p.end {
		if _, ok := p.recs[p.start]; ok {
			return
		}
		p.start++
	}
}

// Snapshot encoding, version 1 (big endian; n is a uvarint):
//
//	u8 version (1), i64 start, i64 end,
//	n records, each: i64 offset, i16 delivery count
//
// Acquired records are stored as available: locks do not survive a
// restart.
const snapshotVersion = 1

// Encode is the partition's durable state.
func (p *Partition) Encode() []byte {
	out := make([]byte, 0, 24+10*len(p.recs))
	out = append(out, snapshotVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(p.start))
	out = binary.BigEndian.AppendUint64(out, uint64(p.end))
	out = binary.AppendUvarint(out, uint64(len(p.recs)))
	for _, o := range slices.Sorted(maps.Keys(p.recs)) {
		out = binary.BigEndian.AppendUint64(out, uint64(o))
		out = binary.BigEndian.AppendUint16(out, uint16(p.recs[o].count))
	}
	return out
}

// ErrBadSnapshot is a snapshot that does not decode.
var ErrBadSnapshot = errors.New("shares: corrupt share-partition snapshot")

// Decode restores a partition from Encode's bytes.
func Decode(b []byte) (*Partition, error) {
	if len(b) < 17 || b[0] != snapshotVersion {
		return nil, ErrBadSnapshot
	}
	p := New(int64(binary.BigEndian.Uint64(b[1:])))
	p.end = int64(binary.BigEndian.Uint64(b[9:]))
	b = b[17:]
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) != n*10 {
		return nil, ErrBadSnapshot
	}
	b = b[k:]
	for range n {
		o := int64(binary.BigEndian.Uint64(b))
		if o < p.start || o >= p.end {
			return nil, ErrBadSnapshot
		}
		p.recs[o] = &inFlight{count: int16(binary.BigEndian.Uint16(b[8:]))}
		b = b[10:]
	}
	if p.end < p.start {
		return nil, ErrBadSnapshot
	}
	return p, nil
}
