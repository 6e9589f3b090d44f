package wal

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// A frame's checksum is CRC-32C of its length (4 bytes, little endian),
// data, then Pos, as the format says, however it is computed: the writer
// and the reader share dataCRC, so only a reference computation catches a
// change of it.
func TestFrameChecksumIsCRC32C(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 70000, 1 << 20} {
		rec := make([]byte, n)
		for i := range rec {
			rec[i] = byte(i * 7)
		}
		frame := appendFrame([]byte("prefix"), 12345, rec, dataCRC(rec))[len("prefix"):]
		ref := binary.LittleEndian.AppendUint32(nil, uint32(n))
		ref = append(ref, rec...)
		ref = binary.LittleEndian.AppendUint64(ref, 12345)
		if got, want := binary.LittleEndian.Uint32(frame), crc32.Checksum(ref, crc32.MakeTable(crc32.Castagnoli)); got != want {
			t.Fatalf("record of %d bytes: checksum %08x, CRC-32C %08x", n, got, want)
		}
		if why := checkFrame(frame[:headerSize], frame[headerSize:]); why != "" || frameLen(frame) != n || framePos(frame) != 12345 {
			t.Fatalf("record of %d bytes: %q len %d pos %d", n, why, frameLen(frame), framePos(frame))
		}
	}
}
