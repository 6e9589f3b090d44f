package leaderstub

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// chargeLog is a memBudget that records what is charged: the peak and the
// balance (zero once everything was released).
type chargeLog struct {
	mu            sync.Mutex
	held, peak    int64
	charges       int
	failAfter     int64 // > 0: a charge past this many bytes held fails
	releasedExtra bool  // a release of more than was held
}

func (c *chargeLog) Charge(n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failAfter > 0 && c.held+n > c.failAfter {
		return errors.New("over budget")
	}
	c.held += n
	c.charges++
	c.peak = max(c.peak, c.held)
	return nil
}

func (c *chargeLog) Release(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.held {
		c.releasedExtra = true
	}
	c.held -= n
}

// recordsBody encodes records with the given values (nil: a null value)
// and one header each, as a batch's (uncompressed) records section.
func recordsBody(values ...[]byte) []byte {
	var out []byte
	for i, v := range values {
		var rec []byte
		rec = append(rec, 0)                   // attributes
		rec = kbin.AppendVarlong(rec, 5)       // timestamp delta
		rec = kbin.AppendVarint(rec, int32(i)) // offset delta
		rec = kbin.AppendVarint(rec, 3)        // key
		rec = append(rec, "key"...)            //
		if v == nil {
			rec = kbin.AppendVarint(rec, -1)
		} else {
			rec = kbin.AppendVarint(rec, int32(len(v)))
			rec = append(rec, v...)
		}
		rec = kbin.AppendVarint(rec, 1) // one header
		rec = kbin.AppendVarint(rec, 1)
		rec = append(rec, 'h')
		rec = kbin.AppendVarint(rec, 2)
		rec = append(rec, "hv"...)
		out = kbin.AppendVarint(out, int32(len(rec)))
		out = append(out, rec...)
	}
	return out
}

// xerial frames b as the Java client's snappy does, in chunks of chunk
// bytes.
func xerial(b []byte, chunk int) []byte {
	out := append([]byte(nil), xerialHeader...)
	out = append(out, 0, 0, 0, 1, 0, 0, 0, 1)
	for len(b) > 0 {
		n := min(chunk, len(b))
		enc := s2.EncodeSnappy(nil, b[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
		b = b[n:]
	}
	return out
}

type codecCase struct {
	name     string
	id       int16
	compress func([]byte) []byte
}

func codecCases(t *testing.T) []codecCase {
	cases := []codecCase{{"none", 0, func(b []byte) []byte { return b }}}
	for _, c := range []struct {
		name  string
		id    int16
		codec kgo.CompressionCodec
	}{{"gzip", 1, kgo.GzipCompression()}, {"snappy", 2, kgo.SnappyCompression()}, {"lz4", 3, kgo.Lz4Compression()}, {"zstd", 4, kgo.ZstdCompression()}} {
		comp, err := kgo.DefaultCompressor(c.codec)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, codecCase{c.name, c.id, func(b []byte) []byte {
			out, _ := comp.Compress(&bytes.Buffer{}, b)
			return append([]byte(nil), out...)
		}})
	}
	return append(cases, codecCase{"xerial snappy", 2, func(b []byte) []byte { return xerial(b, 32<<10) }})
}

// setDecompressLimit lowers maxDecompressedBatch for a test: the code
// paths are the same, the bombs smaller.
func setDecompressLimit(t *testing.T, n int) {
	old := maxDecompressedBatch
	maxDecompressedBatch = n
	t.Cleanup(func() { maxDecompressedBatch = old })
}

// Every codec kgo produces (and xerial snappy) decodes to what was
// compressed and validates; a batch that would expand past the limit is
// refused as it streams, holding only the codec's working memory (never
// the output), and everything charged is released.
func TestDecompressBounded(t *testing.T) {
	setDecompressLimit(t, 1<<20)
	body := recordsBody([]byte("v1"), nil, bytes.Repeat([]byte("txncoord "), 1000))
	// One record whose value is 2 MiB of zeros: well-formed, too large.
	bomb := recordsBody(make([]byte, 2<<20))
	for _, c := range codecCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var mem chargeLog
			recs, err := openRecords(c.compress(body), c.id, &mem)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(recs)
			recs.close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("round trip: %v (%d bytes, want %d)", err, len(got), len(body))
			}
			if err := validateRecordData(c.compress(body), c.id, 3, &mem); err != nil {
				t.Fatalf("valid records refused: %v", err)
			}
			compressed := c.compress(bomb)
			if c.id != 0 && len(compressed) > 128<<10 {
				t.Fatalf("test bomb is %d bytes compressed", len(compressed))
			}
			err = validateRecordData(compressed, c.id, 1, &mem)
			if c.id == 0 {
				// Uncompressed, the frame limit bounds it: it is valid.
				if err != nil {
					t.Fatalf("uncompressed 2 MiB record: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), errTooLarge.Error()) || !errors.Is(err, kerr.CorruptMessage) {
				t.Fatalf("%d-byte bomb: %v, want CORRUPT_MESSAGE: %v", len(compressed), err, errTooLarge)
			}
			// lz4 (kgo: 4 MiB blocks, two buffers) holds the most.
			if mem.peak > 9<<20 {
				t.Fatalf("charged %d KiB at the peak", mem.peak>>10)
			}
			if mem.held != 0 || mem.releasedExtra {
				t.Fatalf("after validation %d bytes still charged (released extra: %v)", mem.held, mem.releasedExtra)
			}
			t.Logf("peak charge %d KiB over %d charges", mem.peak>>10, mem.charges)
		})
	}
	if err := validateRecordData([]byte("garbage"), 4, 1, &chargeLog{}); err == nil {
		t.Fatal("garbage zstd decoded")
	}
}

// A raw snappy block is decoded whole: its size is charged before it is
// allocated, and a charge the budget refuses refuses the batch.
func TestDecompressRawSnappyCharged(t *testing.T) {
	body := recordsBody(bytes.Repeat([]byte{7}, 300<<10))
	block := s2.EncodeSnappy(nil, body)
	var mem chargeLog
	if err := validateRecordData(block, 2, 1, &mem); err != nil {
		t.Fatal(err)
	}
	if mem.peak < int64(len(body)) || mem.held != 0 {
		t.Fatalf("peak %d for a %d-byte block, %d still held", mem.peak, len(body), mem.held)
	}
	small := chargeLog{failAfter: 64 << 10}
	if err := validateRecordData(block, 2, 1, &small); err == nil || !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("block over the budget: %v", err)
	}
	if small.held != 0 {
		t.Fatalf("%d bytes held after a refused charge", small.held)
	}
}

// Streaming validation refuses what the whole-buffer parser refused, with
// the same error codes.
func TestValidateRecordDataMalformed(t *testing.T) {
	good := recordsBody([]byte("a"), []byte("b"))
	wrongDelta := recordsBody([]byte("a"))
	wrongDelta = append(wrongDelta, recordsBody([]byte("b"))...) // second record has delta 0
	truncated := good[:len(good)-2]
	longLen := kbin.AppendVarint(nil, 1000) // a length past the end
	longLen = append(longLen, good[1:]...)
	var negHeaders []byte
	{
		rec := []byte{0}
		rec = kbin.AppendVarlong(rec, 0)
		rec = kbin.AppendVarint(rec, 0)
		rec = kbin.AppendVarint(rec, -1)
		rec = kbin.AppendVarint(rec, -1)
		rec = kbin.AppendVarint(rec, -2) // headers
		negHeaders = kbin.AppendVarint(nil, int32(len(rec)))
		negHeaders = append(negHeaders, rec...)
	}
	overlong := append([]byte(nil), good...)
	overlong = append(kbin.AppendVarint(nil, -1), overlong...) // negative record length
	cases := []struct {
		name  string
		body  []byte
		count int32
		code  *kerr.Error
		msg   string
	}{
		{"valid", good, 2, nil, ""},
		{"fewer records than the header says", good, 3, kerr.CorruptMessage, "record 2: bad length"},
		{"trailing bytes", good, 1, kerr.CorruptMessage, "trailing bytes after 1 records"},
		{"offset delta", wrongDelta, 2, kerr.InvalidRecord, "record 1 has offset delta 0"},
		{"truncated", truncated, 2, kerr.CorruptMessage, "record 1"},
		{"length past the end", longLen, 1, kerr.CorruptMessage, "record 0"},
		{"negative header count", negHeaders, 1, kerr.CorruptMessage, "malformed record"},
		{"negative length", overlong, 1, kerr.CorruptMessage, "record 0: bad length"},
	}
	for _, c := range cases {
		for _, codec := range codecCases(t) {
			err := validateRecordData(codec.compress(c.body), codec.id, c.count, &chargeLog{})
			if c.code == nil {
				if err != nil {
					t.Errorf("%s (%s): %v", c.name, codec.name, err)
				}
				continue
			}
			if !errors.Is(err, c.code) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s (%s): %v, want %s containing %q", c.name, codec.name, err, c.code.Message, c.msg)
			}
		}
	}
}
