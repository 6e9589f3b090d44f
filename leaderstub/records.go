package leaderstub

import (
	"encoding/binary"
	"errors"
	"io"

	"go.etcd.io/bbolt"

	"github.com/txncoord/txncoord/storage"
)

// freeBudget charges nothing: reading back a stored batch (ListOffsets by
// timestamp) decompresses one batch at a time, bounded by
// maxDecompressedBatch, outside any request's budget share.
type freeBudget struct{}

func (freeBudget) Charge(int64) error { return nil }
func (freeBudget) Release(int64)      {}

// recordTimestamps calls fn with the offset and timestamp of each record of
// a stored batch, in order, until fn returns false. A LogAppendTime batch's
// records all have the batch's max timestamp, as Kafka reads them.
func recordTimestamps(raw []byte, fn func(offset, timestamp int64) bool) error {
	h, _, err := parseHeader(raw)
	if err != nil {
		return err
	}
	base := int64(binary.BigEndian.Uint64(raw))
	recs, err := openRecords(raw[batchHeaderLen:], h.Attributes&attrCompressionMask, freeBudget{})
	if err != nil {
		return err
	}
	defer recs.close()
	for i := int32(0); i < h.RecordCount; i++ {
		length, err := readVarint(recs)
		if err != nil || length < 0 {
			return errors.Join(errMalformedRecord, err)
		}
		rec := inRecord{recs: recs, left: int(length)}
		if _, err := rec.ReadByte(); err != nil { // attributes
			return err
		}
		tsDelta, err := readVarlong(&rec)
		if err != nil {
			return err
		}
		offDelta, err := readVarint(&rec)
		if err != nil {
			return err
		}
		if err := recs.skip(rec.left); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		ts := h.BaseTimestamp + tsDelta
		if h.Attributes&attrLogAppendTime != 0 {
			ts = h.MaxTimestamp
		}
		if !fn(base+int64(offDelta), ts) {
			return nil
		}
	}
	return nil
}

// readBatches returns the stored bytes of batches of p (nil for one that
// retention dropped meanwhile): from memory while the process log's
// applier has not written them to bbolt, else from bbolt.
func (l *Leader) readBatches(p *partition, refs []fetchedBatch) ([][]byte, error) {
	out := make([][]byte, len(refs))
	inBolt := false
	for i, b := range refs {
		out[i] = b.raw
		inBolt = inBolt || b.raw == nil
	}
	if !inBolt {
		return out, nil
	}
	err := l.space.View(func(r storage.Root) error {
		var log *bbolt.Bucket
		if root := r.Bucket(bucketPartitions); root != nil {
			if pb := root.Bucket(p.key); pb != nil {
				log = pb.Bucket(bucketLog)
			}
		}
		for i, b := range refs {
			if out[i] == nil && log != nil {
				if v := log.Get(u64(b.base)); v != nil {
					out[i] = append([]byte(nil), v...) // bbolt's bytes live only in the transaction
				}
			}
		}
		return nil
	})
	return out, err
}
