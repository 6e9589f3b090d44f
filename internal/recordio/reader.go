package recordio

import "encoding/binary"

// Reader reads one record; the first failure sticks.
type Reader struct {
	b   []byte
	bad error
	err error
}

// NewReader reads b; bad is the error of a record that is too short or
// holds a value out of range.
func NewReader(b []byte, bad error) *Reader { return &Reader{b: b, bad: bad} }

// Err is the first failure, nil if none.
func (r *Reader) Err() error { return r.err }

// Len is the number of bytes not read yet.
func (r *Reader) Len() int { return len(r.b) }

// Fail marks the record bad (a value the decoder refuses), unless it
// failed already.
func (r *Reader) Fail() { r.FailWith(r.bad) }

// FailWith records err as the failure, unless the record failed already.
func (r *Reader) FailWith(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Take reads n bytes (nil after a failure).
func (r *Reader) Take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.Fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// Uvarint reads a length or count: a uvarint no larger than the record
// (a count the record cannot hold is refused before anything is
// allocated for it).
func (r *Reader) Uvarint() int {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.b)
	if k <= 0 || v > uint64(len(r.b)) {
		r.Fail()
		return 0
	}
	r.b = r.b[k:]
	return int(v)
}

// Bytes reads a uvarint length and that many bytes.
func (r *Reader) Bytes() []byte { return r.Take(r.Uvarint()) }

// String reads a uvarint length and that many bytes as a string.
func (r *Reader) String() string {
	if r.err != nil {
		return ""
	}
	return string(r.Bytes())
}

// Flag reads a presence byte: 0 or 1, anything else is a bad record.
func (r *Reader) Flag() bool {
	v := r.Take(1)
	if v == nil {
		return false
	}
	if v[0] > 1 {
		r.Fail()
	}
	return v[0] == 1
}

// Uint16 reads a big-endian uint16.
func (r *Reader) Uint16() uint16 {
	if v := r.Take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

// Uint32 reads a big-endian uint32.
func (r *Reader) Uint32() uint32 {
	if v := r.Take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// Int64 reads a big-endian int64.
func (r *Reader) Int64() int64 {
	if v := r.Take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}
