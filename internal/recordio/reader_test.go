package recordio

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errBad = errors.New("bad record")

func TestReaderReadsFields(t *testing.T) {
	b := binary.AppendUvarint(nil, 3)
	b = append(b, "abc"...)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint16(b, 7)
	b = binary.BigEndian.AppendUint32(b, 1<<20)
	b = binary.BigEndian.AppendUint64(b, uint64(1<<40))
	r := NewReader(b, errBad)
	if s, f, u16, u32, i64 := r.String(), r.Flag(), r.Uint16(), r.Uint32(), r.Int64(); s != "abc" || !f || u16 != 7 || u32 != 1<<20 || i64 != 1<<40 {
		t.Fatalf("read %q %v %d %d %d", s, f, u16, u32, i64)
	}
	if r.Err() != nil || r.Len() != 0 {
		t.Fatalf("err %v, %d left", r.Err(), r.Len())
	}
}

func TestReaderFirstFailureSticks(t *testing.T) {
	for name, tc := range map[string]struct {
		b    []byte
		read func(*Reader)
	}{
		"short":             {[]byte{1, 2}, func(r *Reader) { r.Uint32() }},
		"length past end":   {binary.AppendUvarint(nil, 5), func(r *Reader) { r.Bytes() }},
		"bad uvarint":       {[]byte{0x80}, func(r *Reader) { r.Uvarint() }},
		"flag out of range": {[]byte{2}, func(r *Reader) { r.Flag() }},
	} {
		t.Run(name, func(t *testing.T) {
			r := NewReader(tc.b, errBad)
			tc.read(r)
			if !errors.Is(r.Err(), errBad) {
				t.Fatalf("err %v, want %v", r.Err(), errBad)
			}
			other := errors.New("later")
			r.FailWith(other)
			if r.Take(0) != nil || r.String() != "" || r.Int64() != 0 || !errors.Is(r.Err(), errBad) {
				t.Fatalf("a failed reader read on: err %v", r.Err())
			}
		})
	}
}
