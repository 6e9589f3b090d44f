package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A frame is one record on disk:
//
//	crc    uint32 (LE)  CRC-32C of length, data, then pos
//	length uint32 (LE)  of data
//	pos    uint64 (LE)  the record's Pos
//	data   [length]byte
//
// The Pos is inside the checksum, so a frame that is intact but in the
// wrong place (a stale block, a misnamed segment) is detected too. It is
// hashed last so that Append can checksum the data before it takes the
// lock that hands out Pos values.
const (
	headerSize = 16
	// maxRecord bounds one record, so a damaged length field cannot make
	// the reader allocate gigabytes.
	maxRecord = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// dataCRC is the checksum of a frame before its Pos is known: of the
// length (4 bytes, little endian), then rec. The length's bytes go through
// the table one by one: a local array handed to crc32.Update would be
// allocated on the heap, once per record.
func dataCRC(rec []byte) uint32 {
	return joinedCRC(nil, rec)
}

// joinedCRC is dataCRC of head followed by body, without joining them.
func joinedCRC(head, body []byte) uint32 {
	crc := ^uint32(0)
	for i, n := 0, uint32(len(head)+len(body)); i < 4; i, n = i+1, n>>8 {
		crc = castagnoli[byte(crc)^byte(n)] ^ (crc >> 8)
	}
	return crc32.Update(crc32.Update(^crc, castagnoli, head), castagnoli, body)
}

// appendFrame appends rec's frame at Pos p; partial is dataCRC(rec). The
// header is written in place in dst (a local array would escape to the
// heap through crc32.Update).
func appendFrame(dst []byte, p Pos, rec []byte, partial uint32) []byte {
	return appendJoinedFrame(dst, p, nil, rec, partial)
}

// appendJoinedFrame is appendFrame of head followed by body; partial is
// joinedCRC(head, body).
func appendJoinedFrame(dst []byte, p Pos, head, body []byte, partial uint32) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	h := dst[start:]
	binary.LittleEndian.PutUint32(h[4:], uint32(len(head)+len(body)))
	binary.LittleEndian.PutUint64(h[8:], uint64(p))
	binary.LittleEndian.PutUint32(h[0:], crc32.Update(partial, castagnoli, h[8:16]))
	return append(append(dst, head...), body...)
}

// frameLen is the data length a header announces.
func frameLen(h []byte) int { return int(binary.LittleEndian.Uint32(h[4:8])) }

// framePos is the Pos a header announces.
func framePos(h []byte) Pos { return Pos(binary.LittleEndian.Uint64(h[8:16])) }

// checkFrame says what is wrong with a frame whose header and data were
// read whole, "" if nothing.
func checkFrame(h, data []byte) string {
	want := crc32.Update(dataCRC(data), castagnoli, h[8:16])
	if got := binary.LittleEndian.Uint32(h[0:4]); got != want {
		return fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	return ""
}

// decodeFrame reads the frame at the start of b: its Pos, data and size
// in bytes, or what is wrong with it.
func decodeFrame(b []byte) (p Pos, data []byte, size int, problem string) {
	if len(b) < headerSize {
		return 0, nil, 0, fmt.Sprintf("truncated frame header (%d of %d bytes)", len(b), headerSize)
	}
	n := frameLen(b)
	if n > len(b)-headerSize {
		return 0, nil, 0, fmt.Sprintf("frame length %d runs past the end of the file (%d bytes left after the header)", n, len(b)-headerSize)
	}
	data = b[headerSize : headerSize+n]
	if problem := checkFrame(b[:headerSize], data); problem != "" {
		return 0, nil, 0, problem
	}
	return framePos(b), data, headerSize + n, ""
}
