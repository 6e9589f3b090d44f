package leaderstub

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Record batch v2 layout (magic 2), offsets into the batch header.
const (
	batchHeaderLen     = 61
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // the CRC covers everything from here on
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	attrCompressionMask = 0x07
	attrTransactional   = 0x10
	attrControl         = 0x20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the parsed header of one record batch.
type batchHeader struct {
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
	Attributes      int16
}

func (h batchHeader) transactional() bool { return h.Attributes&attrTransactional != 0 }
func (h batchHeader) control() bool       { return h.Attributes&attrControl != 0 }
func (h batchHeader) idempotent() bool    { return h.ProducerID >= 0 }

// lastSequence is the sequence of the batch's last record, wrapping at
// MaxInt32 as Kafka does.
func (h batchHeader) lastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	last := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if last > 1<<31-1 {
		last -= 1 << 31
	}
	return int32(last)
}

// errBatch carries the Kafka error code of an invalid batch.
type errBatch struct {
	code *kerr.Error
	msg  string
}

func (e *errBatch) Error() string { return fmt.Sprintf("%s: %s", e.code.Message, e.msg) }
func (e *errBatch) Unwrap() error { return e.code }

func corrupt(format string, args ...any) error {
	return &errBatch{code: kerr.CorruptMessage, msg: fmt.Sprintf(format, args...)}
}

func invalidRecord(format string, args ...any) error {
	return &errBatch{code: kerr.InvalidRecord, msg: fmt.Sprintf(format, args...)}
}

// parseHeader reads the header of the batch at the start of b and returns
// it with the batch's total length. It checks only framing, not the CRC.
func parseHeader(b []byte) (batchHeader, int, error) {
	if len(b) < batchHeaderLen {
		return batchHeader{}, 0, corrupt("record set of %d bytes is shorter than a batch header", len(b))
	}
	length := int(int32(binary.BigEndian.Uint32(b[offBatchLength:])))
	total := length + 12
	if length < batchHeaderLen-12 || total > len(b) {
		return batchHeader{}, 0, corrupt("batch length %d does not fit the %d-byte record set", length, len(b))
	}
	if magic := b[offMagic]; magic != 2 {
		return batchHeader{}, 0, &errBatch{code: kerr.UnsupportedForMessageFormat, msg: fmt.Sprintf("magic %d (only record batch v2 is accepted)", magic)}
	}
	return batchHeader{
		Attributes:      int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:   int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:     int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}, total, nil
}

// splitBatches validates a produced record set: every batch is v2, its
// CRC-32C matches, it decompresses, its records parse and their count
// matches the header. Control batches from clients are refused, as Kafka
// refuses them (only the coordinator writes markers). Decompression charges
// what it holds to mem, the request's budget share.
func splitBatches(records []byte, mem memBudget) ([][]byte, []batchHeader, error) {
	if len(records) == 0 {
		return nil, nil, invalidRecord("empty record set")
	}
	var batches [][]byte
	var headers []batchHeader
	for rest := records; len(rest) > 0; {
		h, n, err := parseHeader(rest)
		if err != nil {
			return nil, nil, err
		}
		raw := rest[:n]
		rest = rest[n:]
		if want, got := binary.BigEndian.Uint32(raw[offCRC:]), crc32.Checksum(raw[offAttributes:], crc32c); want != got {
			return nil, nil, corrupt("CRC mismatch: header %08x, computed %08x", want, got)
		}
		if h.control() {
			return nil, nil, invalidRecord("clients may not write control batches")
		}
		if err := validateRecords(raw, h, mem); err != nil {
			return nil, nil, err
		}
		batches = append(batches, raw)
		headers = append(headers, h)
	}
	return batches, headers, nil
}

// validateRecords checks the batch's record count, then decompresses it and
// parses every record (validateRecordData, decompress.go), so that a
// consumer never receives a batch it cannot read. What decompression holds
// is charged to mem.
func validateRecords(raw []byte, h batchHeader, mem memBudget) error {
	if h.RecordCount <= 0 {
		return invalidRecord("batch with %d records", h.RecordCount)
	}
	if h.LastOffsetDelta != h.RecordCount-1 {
		return invalidRecord("last offset delta %d with %d records", h.LastOffsetDelta, h.RecordCount)
	}
	codec := h.Attributes & attrCompressionMask
	if codec > 4 {
		return invalidRecord("unknown compression codec %d", codec)
	}
	return validateRecordData(raw[batchHeaderLen:], codec, h.RecordCount, mem)
}

// setBaseOffset writes the assigned offset into a batch. The base offset
// and the partition leader epoch lie outside the CRC, so the client's CRC
// stays valid.
func setBaseOffset(raw []byte, base int64) {
	binary.BigEndian.PutUint64(raw[0:], uint64(base))
	binary.BigEndian.PutUint32(raw[offLeaderEpoch:], 0) // every partition is at leader epoch 0 (cluster.View)
}

// controlBatch builds the end-transaction marker exactly as Kafka writes it
// (MemoryRecords.writeEndTransactionalMarker): magic 2, no compression,
// transactional and control flags, base sequence -1, one record whose key is
// {int16 version 0, int16 type (ABORT=0, COMMIT=1)} and whose value is
// {int16 version 0, int32 coordinator epoch}.
func controlBatch(base int64, pid int64, epoch int16, commit bool, coordinatorEpoch int32, nowMillis int64) []byte {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	value := binary.BigEndian.AppendUint16(nil, 0)
	value = binary.BigEndian.AppendUint32(value, uint32(coordinatorEpoch))

	var rec []byte
	rec = append(rec, 0)             // attributes
	rec = kbin.AppendVarlong(rec, 0) // timestamp delta
	rec = kbin.AppendVarint(rec, 0)  // offset delta
	rec = kbin.AppendVarint(rec, int32(len(key)))
	rec = append(rec, key...)
	rec = kbin.AppendVarint(rec, int32(len(value)))
	rec = append(rec, value...)
	rec = kbin.AppendVarint(rec, 0) // headers

	b := make([]byte, batchHeaderLen, batchHeaderLen+len(rec)+5)
	b = kbin.AppendVarint(b, int32(len(rec)))
	b = append(b, rec...)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-12))
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0)
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(nowMillis))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(nowMillis))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], 0xFFFFFFFF)
	binary.BigEndian.PutUint32(b[offRecordCount:], 1)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crc32c))
	return b
}
