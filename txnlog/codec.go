package txnlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/txncoord/txncoord/txncore"
)

// Record format of one transaction (value of the txns bucket, key = the
// transactional id). Version 1, big endian:
//
//	u8  version (1)
//	u16 len + transactional id
//	i64 producer id, i64 prev producer id, i64 next producer id
//	i16 producer epoch, i16 last producer epoch
//	i32 timeout ms
//	u8  state
//	i64 start ms, i64 last update ms
//	i16 client transaction version
//	u32 partition count, then per partition: u16 len + topic, i32 partition
//
// Version 2 is version 1 followed by the Completing transaction:
//
//	u8  commit (0/1), i64 producer id, i16 producer epoch, i16 transaction version
//	u32 partition count, then per partition as above
//
// A record is written at version 1 unless it has a Completing
// transaction, so a binary that reads only version 1 still reads every
// record without one. A reader rejects any other version with
// ErrUnknownVersion instead of guessing: a newer binary's record must not be
// half-read by an older one.
const (
	txnRecordVersion           = 1
	txnRecordVersionCompleting = 2
)

// ErrUnknownVersion is returned for a record written by an unknown codec
// version.
var ErrUnknownVersion = errors.New("txnlog: unknown record version")

// ErrCorrupt is returned for a record that cannot be decoded.
var ErrCorrupt = errors.New("txnlog: corrupt record")

// EncodeTxn encodes m at the current record version.
func EncodeTxn(m TxnMetadata) []byte {
	return appendTxn(make([]byte, 0, txnSize(m)), m)
}

// txnSize is the length of m's record: a batch of several is encoded into
// one buffer sized once.
func txnSize(m TxnMetadata) int {
	size := 1 + 2 + min(len(m.TransactionalID), 0xffff) + 8*3 + 2*2 + 4 + 1 + 8*2 + 2 + 4
	for _, p := range m.Partitions {
		size += 2 + min(len(p.Topic), 0xffff) + 4
	}
	if c := m.Completing; c != nil {
		size += 1 + 8 + 2 + 2 + 4
		for _, p := range c.Partitions {
			size += 2 + min(len(p.Topic), 0xffff) + 4
		}
	}
	return size
}

// appendTxn appends m's record (EncodeTxn) to b.
func appendTxn(b []byte, m TxnMetadata) []byte {
	version := byte(txnRecordVersion)
	if m.Completing != nil {
		version = txnRecordVersionCompleting
	}
	b = append(b, version)
	b = appendString(b, m.TransactionalID)
	b = binary.BigEndian.AppendUint64(b, uint64(m.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(m.PrevProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(m.NextProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(m.ProducerEpoch))
	b = binary.BigEndian.AppendUint16(b, uint16(m.LastProducerEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(m.TimeoutMs))
	b = append(b, byte(m.State))
	b = binary.BigEndian.AppendUint64(b, uint64(m.StartTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(m.LastUpdateTimestamp))
	b = binary.BigEndian.AppendUint16(b, uint16(m.ClientTransactionVersion))
	b = appendPartitions(b, m.Partitions)
	if c := m.Completing; c != nil {
		commit := byte(0)
		if c.Commit {
			commit = 1
		}
		b = append(b, commit)
		b = binary.BigEndian.AppendUint64(b, uint64(c.ProducerID))
		b = binary.BigEndian.AppendUint16(b, uint16(c.ProducerEpoch))
		b = binary.BigEndian.AppendUint16(b, uint16(c.TransactionVersion))
		b = appendPartitions(b, c.Partitions)
	}
	return b
}

func appendPartitions(b []byte, tps []txncore.TopicPartition) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(tps)))
	for _, p := range tps {
		b = appendString(b, p.Topic)
		b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	if len(s) > 0xffff {
		s = s[:0xffff] // ids and topic names are far shorter; never reached
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// DecodeTxn decodes a record written by EncodeTxn.
func DecodeTxn(raw []byte) (TxnMetadata, error) {
	var m TxnMetadata
	if len(raw) == 0 {
		return m, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if raw[0] != txnRecordVersion && raw[0] != txnRecordVersionCompleting {
		return m, fmt.Errorf("%w %d (this binary reads versions %d and %d)", ErrUnknownVersion, raw[0], txnRecordVersion, txnRecordVersionCompleting)
	}
	r := reader{b: raw[1:]}
	m.TransactionalID = r.str()
	m.ProducerID = int64(r.u64())
	m.PrevProducerID = int64(r.u64())
	m.NextProducerID = int64(r.u64())
	m.ProducerEpoch = int16(r.u16())
	m.LastProducerEpoch = int16(r.u16())
	m.TimeoutMs = int32(r.u32())
	m.State = State(r.u8())
	m.StartTimestamp = int64(r.u64())
	m.LastUpdateTimestamp = int64(r.u64())
	m.ClientTransactionVersion = int16(r.u16())
	m.Partitions = r.partitions()
	if raw[0] == txnRecordVersionCompleting {
		c := &Completion{}
		switch r.u8() {
		case 0:
		case 1:
			c.Commit = true
		default:
			if r.err == nil {
				r.err = errors.New("completing: bad commit flag")
			}
		}
		c.ProducerID = int64(r.u64())
		c.ProducerEpoch = int16(r.u16())
		c.TransactionVersion = int16(r.u16())
		c.Partitions = r.partitions()
		m.Completing = c
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err == nil && m.State > PrepareEpochFence {
		r.err = fmt.Errorf("state %d", m.State)
	}
	if r.err != nil {
		return TxnMetadata{}, fmt.Errorf("%w: %v", ErrCorrupt, r.err)
	}
	return m, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = errors.New("truncated")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// partitions reads a partition count and the partitions. Each partition
// takes at least 6 bytes: counts the record cannot hold are refused before
// allocating for them.
func (r *reader) partitions() []txncore.TopicPartition {
	n := r.u32()
	if r.err == nil && uint64(n)*6 > uint64(len(r.b)) {
		r.err = fmt.Errorf("partition count %d exceeds record", n)
	}
	if r.err != nil || n == 0 {
		return nil
	}
	tps := make([]txncore.TopicPartition, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		topic := r.str()
		tps = append(tps, txncore.TopicPartition{Topic: topic, Partition: int32(r.u32())})
	}
	return tps
}

func (r *reader) str() string {
	n := r.u16()
	return string(r.take(int(n)))
}

// Meta values (coordinator epoch, pid high-water mark): u8 version (1) then
// the big-endian integer.
const metaVersion = 1

func encodeMeta(v int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{metaVersion}, uint64(v))
}

func decodeMeta(raw []byte) (int64, error) {
	if len(raw) == 0 {
		return 0, fmt.Errorf("%w: empty meta value", ErrCorrupt)
	}
	if raw[0] != metaVersion {
		return 0, fmt.Errorf("%w %d in meta value", ErrUnknownVersion, raw[0])
	}
	if len(raw) != 9 {
		return 0, fmt.Errorf("%w: meta value of %d bytes", ErrCorrupt, len(raw))
	}
	return int64(binary.BigEndian.Uint64(raw[1:])), nil
}
