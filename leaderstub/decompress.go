package leaderstub

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxDecompressedBatch bounds what one record batch may decompress to. A
// frame is at most 100 MiB, but a compressed batch of that size can expand
// a thousandfold: without a bound, one crafted Produce could exhaust the
// node's memory. Kafka's own batches are 1 MiB by default
// (message.max.bytes), so this leaves ample room.
// It is a variable only so that a test can lower it (setDecompressLimit).
var maxDecompressedBatch = 128 << 20

var errTooLarge = errors.New("decompressed batch too large")

// zstdDecoder is shared: DecodeAll is safe for concurrent use, and the
// memory bound makes it refuse an oversized frame before allocating it.
var zstdDecoder = newZstdDecoder(maxDecompressedBatch)

func newZstdDecoder(limit int) *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(uint64(limit)))
	if err != nil {
		panic(err) // only bad options fail, and these are constant
	}
	return d
}

// xerialHeader starts snappy data framed the way the Java client writes it.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompressBounded decompresses a batch's records with Kafka's codec ids
// (1 gzip, 2 snappy, 3 lz4, 4 zstd), refusing output past
// maxDecompressedBatch.
func decompressBounded(src []byte, codec int16) ([]byte, error) {
	switch codec {
	case 0:
		return src, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return readBounded(zr)
	case 2:
		return snappyBounded(src)
	case 3:
		return readBounded(lz4.NewReader(bytes.NewReader(src)))
	case 4:
		out, err := zstdDecoder.DecodeAll(src, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, errTooLarge
		}
		return out, err
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

func readBounded(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(maxDecompressedBatch)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxDecompressedBatch {
		return nil, errTooLarge
	}
	return out, nil
}

// snappyBounded decodes raw snappy or xerial-framed snappy, checking each
// block's declared length before decoding it.
func snappyBounded(src []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialHeader) {
		return snappyBlock(nil, src)
	}
	if len(src) < 16 {
		return nil, errors.New("xerial snappy: short header")
	}
	var out []byte
	for rest := src[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("xerial snappy: short chunk length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, errors.New("xerial snappy: chunk past the end")
		}
		var err error
		if out, err = snappyBlock(out, rest[:n]); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

func snappyBlock(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if len(dst)+n > maxDecompressedBatch {
		return nil, errTooLarge
	}
	decoded, err := s2.Decode(nil, block)
	if err != nil {
		return nil, err
	}
	return append(dst, decoded...), nil
}
