package leaderstub

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Every codec kgo produces with decodes, and a batch that would expand past
// maxDecompressedBatch is refused without being expanded (a 100 MiB frame
// of zeros compresses to almost nothing).
func TestDecompressBounded(t *testing.T) {
	// A 1 MiB limit keeps the test fast; the code paths are the same.
	old := maxDecompressedBatch
	maxDecompressedBatch, zstdDecoder = 1<<20, newZstdDecoder(1<<20)
	defer func() { maxDecompressedBatch, zstdDecoder = old, newZstdDecoder(old) }()
	small := bytes.Repeat([]byte("txncoord "), 1000)
	huge := make([]byte, maxDecompressedBatch+1)
	codecs := []struct {
		id    int16
		codec kgo.CompressionCodec
	}{{1, kgo.GzipCompression()}, {2, kgo.SnappyCompression()}, {3, kgo.Lz4Compression()}, {4, kgo.ZstdCompression()}}
	for _, c := range codecs {
		comp, err := kgo.DefaultCompressor(c.codec)
		if err != nil {
			t.Fatal(err)
		}
		compress := func(b []byte) []byte {
			out, _ := comp.Compress(&bytes.Buffer{}, b)
			return append([]byte(nil), out...)
		}
		got, err := decompressBounded(compress(small), c.id)
		if err != nil || !bytes.Equal(got, small) {
			t.Fatalf("codec %d: round trip: %v", c.id, err)
		}
		bomb := compress(huge)
		if len(bomb) > 128<<10 {
			t.Fatalf("codec %d: test bomb is %d bytes compressed", c.id, len(bomb))
		}
		if _, err := decompressBounded(bomb, c.id); !errors.Is(err, errTooLarge) {
			t.Fatalf("codec %d: %d-byte bomb: %v, want errTooLarge", c.id, len(bomb), err)
		}
	}
	if _, err := decompressBounded([]byte("garbage"), 4); err == nil {
		t.Fatal("garbage zstd decoded")
	}
}
