package leaderstub

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Record validation streams: a batch's records are decompressed and parsed
// as they come, and the decompressed bytes are never assembled, so what a
// validation holds is the codec's working memory (its window or block
// buffers), not the batch. That memory is charged to the request's share
// of the server's budget for requests in flight (wire.BudgetFrom) while it
// is held. Two things bound a batch:
//
//   - maxDecompressedBatch: a batch that decompresses to more is refused
//     (CORRUPT_MESSAGE) as soon as its output passes the limit;
//   - decompressSlots: only so many batches decompress more than
//     slotAfterBytes at once, so that CPU-bound decompression (a bomb
//     takes ~100 ms per 128 MiB) cannot starve the other requests.
//
// Raw snappy (not xerial-framed, as kgo and librdkafka write it) is the one
// codec decoded whole, block at a time: its output is charged before it is
// allocated. Everything is charged before decompression starts, so a
// decompression never waits for the budget while it holds a slot (the
// requests waiting for that slot could be the ones holding the budget).

// maxDecompressedBatch bounds what one record batch may decompress to. A
// frame is at most 100 MiB, but a compressed batch of that size can expand
// a thousandfold. Kafka's own batches are 1 MiB by default
// (message.max.bytes), so this leaves ample room.
// It is a variable only so that a test can lower it.
var maxDecompressedBatch = 128 << 20

var errTooLarge = errors.New("decompressed batch too large")

// memBudget is what validation charges the memory it holds to:
// wire.MemoryBudget (a small interface, so that this file does not depend
// on wire's types).
type memBudget interface {
	Charge(n int64) error
	Release(n int64)
}

// decompressSlots limits the batches past slotAfterBytes of output that
// decompress at once: half the cores, at least one.
var decompressSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// slotAfterBytes is the output after which a decompression takes a slot:
// everyday batches never wait for one.
const slotAfterBytes = 1 << 20

// Working memory charged per codec, beyond the data-dependent part.
const (
	parseBufBytes = 32 << 10  // the bufio.Reader records are parsed from
	gzipMemBytes  = 64 << 10  // flate's 32 KiB window and tables
	zstdMemBytes  = 256 << 10 // zstd's block buffers
)

// xerialHeader starts snappy data framed the way the Java client writes it.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// records is a batch's decompressed records as a byte stream.
type records struct {
	// data is the whole output when it is in memory (no compression, raw
	// snappy); otherwise br reads the decoder through out.
	data []byte
	off  int
	br   *bufio.Reader
	out  *boundedReader

	mem     memBudget
	charged int64
	release func() // returns the decoder to its pool
}

// openRecords starts decompressing a batch's records (Kafka's codec ids: 0
// none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), charging mem for what it holds.
// close releases everything.
func openRecords(src []byte, codec int16, mem memBudget) (*records, error) {
	r := &records{mem: mem}
	var dec io.Reader
	switch codec {
	case 0:
		r.data = src
		return r, nil
	case 1:
		if err := r.charge(gzipMemBytes); err != nil {
			return nil, err
		}
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = zr.Reset(bytes.NewReader(src))
		}
		if err != nil {
			r.close()
			return nil, err
		}
		r.release = func() { gzipReaders.Put(zr) }
		dec = zr
	case 2:
		if !bytes.HasPrefix(src, xerialHeader) {
			return r, r.rawSnappy(src)
		}
		if len(src) < 16 {
			return nil, errors.New("xerial snappy: short header")
		}
		largest, err := xerialLargestChunk(src[16:])
		if err != nil {
			return nil, err
		}
		if err := r.charge(int64(largest)); err != nil {
			return nil, err
		}
		dec = &xerialReader{rest: src[16:], buf: make([]byte, largest)}
	case 3:
		if err := r.charge(2 * lz4BlockBytes(src)); err != nil {
			return nil, err
		}
		zr, _ := lz4Readers.Get().(*lz4.Reader)
		if zr == nil {
			zr = lz4.NewReader(nil)
		}
		zr.Reset(bytes.NewReader(src))
		r.release = func() { zr.Reset(nil); lz4Readers.Put(zr) }
		dec = zr
	case 4:
		d, release, err := r.zstd(src)
		if err != nil {
			r.close()
			return nil, err
		}
		r.release = release
		dec = d
	default:
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	if err := r.charge(parseBufBytes); err != nil {
		r.close()
		return nil, err
	}
	r.out = &boundedReader{r: dec, left: maxDecompressedBatch}
	r.br = parseBufs.Get().(*bufio.Reader)
	r.br.Reset(r.out)
	return r, nil
}

func (r *records) charge(n int64) error {
	if err := r.mem.Charge(n); err != nil {
		return err
	}
	r.charged += n
	return nil
}

func (r *records) close() {
	if r.br != nil {
		r.br.Reset(nil)
		parseBufs.Put(r.br)
		r.br = nil
	}
	if r.release != nil {
		r.release()
		r.release = nil
	}
	if r.out != nil {
		r.out.dropSlot()
	}
	r.mem.Release(r.charged)
	r.charged = 0
}

func (r *records) ReadByte() (byte, error) {
	if r.br != nil {
		return r.br.ReadByte()
	}
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	b := r.data[r.off]
	r.off++
	return b, nil
}

// skip discards n bytes; io.ErrUnexpectedEOF if the records end first.
func (r *records) skip(n int) error {
	if r.br != nil {
		if m, err := r.br.Discard(n); m < n {
			return eofIsUnexpected(err)
		}
		return nil
	}
	if n > len(r.data)-r.off {
		r.off = len(r.data)
		return io.ErrUnexpectedEOF
	}
	r.off += n
	return nil
}

// Read makes records an io.Reader (tests read whole outputs with it).
func (r *records) Read(p []byte) (int, error) {
	if r.br != nil {
		return r.br.Read(p)
	}
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

func eofIsUnexpected(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// boundedReader passes a decoder's output through, failing with
// errTooLarge once it goes past the limit, and takes a decompression slot
// once it passes slotAfterBytes.
type boundedReader struct {
	r       io.Reader
	left    int
	read    int
	hasSlot bool
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.read >= slotAfterBytes && !b.hasSlot {
		decompressSlots <- struct{}{}
		b.hasSlot = true
	}
	if b.left <= 0 {
		// At the limit: one more byte is too much.
		var one [1]byte
		if n, err := io.ReadFull(b.r, one[:]); n > 0 {
			return 0, errTooLarge
		} else if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		} else if err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= n
	b.read += n
	return n, err
}

func (b *boundedReader) dropSlot() {
	if b.hasSlot {
		<-decompressSlots
		b.hasSlot = false
	}
}

// Pools: a decoder's allocation costs more than decoding a small batch.
var (
	parseBufs   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, parseBufBytes) }}
	gzipReaders sync.Pool
	lz4Readers  sync.Pool
	// zstdReaders pools decoders by window class up to zstdPoolMaxWindow;
	// larger windows get a decoder of their own.
	zstdReaders       [zstdPoolClasses]sync.Pool
	zstdPoolMaxWindow = 8 << 20
)

const (
	zstdMinWindowClass = 1 << 20
	zstdPoolClasses    = 4 // 1, 2, 4 and 8 MiB
)

// lz4BlockBytes is the block size an lz4 frame declares (its BD byte), which
// its decoder allocates for each of its two block buffers; 4 MiB when the
// header is unreadable (the decoder then fails anyway).
func lz4BlockBytes(src []byte) int64 {
	const magic = 0x184D2204
	if len(src) >= 6 && binary.LittleEndian.Uint32(src) == magic {
		if id := (src[5] >> 4) & 7; id >= 4 {
			return 64 << 10 << (2 * (id - 4)) // 64 KiB, 256 KiB, 1 MiB, 4 MiB
		}
	}
	return 4 << 20
}

// zstd returns a streaming decoder of src whose window is bounded by the
// class charged for it: the first frame's window (its content size for a
// single-segment frame) rounded up to a power of two, at least 1 MiB. A
// later frame with a larger window fails to decode instead of growing
// uncharged.
func (r *records) zstd(src []byte) (io.Reader, func(), error) {
	var h zstd.Header
	window := uint64(zstdMinWindowClass)
	if err := h.Decode(src); err == nil {
		w := h.WindowSize
		if h.SingleSegment {
			w = h.FrameContentSize
		}
		if w > uint64(maxDecompressedBatch) {
			return nil, nil, errTooLarge
		}
		window = max(window, w)
	}
	class := uint64(1) << bits.Len64(window-1)
	class = min(class, max(uint64(maxDecompressedBatch), zstdMinWindowClass))
	if err := r.charge(int64(class) + zstdMemBytes); err != nil {
		return nil, nil, err
	}
	var pool *sync.Pool
	if class <= uint64(zstdPoolMaxWindow) {
		pool = &zstdReaders[bits.Len64(class/zstdMinWindowClass)-1]
	}
	var d *zstd.Decoder
	if pool != nil {
		d, _ = pool.Get().(*zstd.Decoder)
	}
	if d == nil {
		var err error
		d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(class), zstd.WithDecoderMaxMemory(class))
		if err != nil {
			return nil, nil, err
		}
	}
	if err := d.Reset(bytes.NewReader(src)); err != nil {
		d.Close()
		return nil, nil, err
	}
	release := func() {
		if pool == nil {
			d.Close()
			return
		}
		d.Reset(nil)
		pool.Put(d)
	}
	return zstdErrors{d}, release, nil
}

// zstdErrors reports the decoder's size refusals as errTooLarge.
type zstdErrors struct{ d *zstd.Decoder }

func (z zstdErrors) Read(p []byte) (int, error) {
	n, err := z.d.Read(p)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		err = errTooLarge
	}
	return n, err
}

// rawSnappy decodes a raw snappy block whole (the format has no window to
// stream with), charging its size first.
func (r *records) rawSnappy(src []byte) error {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return err
	}
	if n > maxDecompressedBatch {
		return errTooLarge
	}
	if err := r.charge(int64(n)); err != nil {
		return err
	}
	if n > slotAfterBytes {
		decompressSlots <- struct{}{}
		defer func() { <-decompressSlots }()
	}
	if r.data, err = s2.Decode(make([]byte, n), src); err != nil {
		r.close()
		return err
	}
	return nil
}

// xerialLargestChunk walks xerial-framed snappy's chunk headers: the
// largest chunk's decoded size, which is what decoding it holds, or
// errTooLarge when the chunks add up to more than the limit. It is charged
// before decoding starts, so that decoding never waits for the budget
// while it holds a decompression slot.
func xerialLargestChunk(rest []byte) (int, error) {
	largest, total := 0, 0
	for len(rest) > 0 {
		if len(rest) < 4 {
			return 0, errors.New("xerial snappy: short chunk length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return 0, errors.New("xerial snappy: chunk past the end")
		}
		size, err := s2.DecodedLen(rest[:n])
		if err != nil {
			return 0, err
		}
		if total += size; total > maxDecompressedBatch {
			return 0, errTooLarge
		}
		largest = max(largest, size)
		rest = rest[n:]
	}
	return largest, nil
}

// xerialReader decodes xerial-framed snappy chunk by chunk into buf, sized
// for the largest chunk (xerialLargestChunk checked the framing).
type xerialReader struct {
	rest    []byte
	buf     []byte // decoded chunk
	pending []byte // what of buf is not read yet
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for len(x.pending) == 0 {
		if len(x.rest) == 0 {
			return 0, io.EOF
		}
		n := binary.BigEndian.Uint32(x.rest)
		chunk := x.rest[4 : 4+n]
		x.rest = x.rest[4+n:]
		var err error
		if x.pending, err = s2.Decode(x.buf, chunk); err != nil {
			return 0, err
		}
	}
	n := copy(p, x.pending)
	x.pending = x.pending[n:]
	return n, nil
}

// validateRecordData decompresses a batch's records and parses each of the
// count records the header announces, as a stream, so that a consumer never
// receives a batch it cannot read. Errors are the batch errors Produce
// answers with.
func validateRecordData(src []byte, codec int16, count int32, mem memBudget) error {
	recs, err := openRecords(src, codec, mem)
	if err != nil {
		return corrupt("decompress (codec %d): %v", codec, err)
	}
	defer recs.close()
	// A read error that is not the records' own end is the decoder's.
	fail := func(i int32, err error) error {
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) && !errors.Is(err, errMalformedRecord) {
			return corrupt("decompress (codec %d): %v", codec, err)
		}
		return corrupt("record %d: %v", i, errors.Join(err, errors.New("malformed record")))
	}
	for i := int32(0); i < count; i++ {
		length, err := readVarint(recs)
		if err != nil || length < 0 {
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errMalformedRecord) {
				return fail(i, err)
			}
			return corrupt("record %d: bad length", i)
		}
		rec := inRecord{recs: recs, left: int(length)}
		if _, err := rec.ReadByte(); err != nil { // attributes
			return fail(i, err)
		}
		if _, err := readVarlong(&rec); err != nil { // timestamp delta
			return fail(i, err)
		}
		delta, err := readVarint(&rec)
		if err != nil {
			return fail(i, err)
		}
		if delta != i {
			return invalidRecord("record %d has offset delta %d", i, delta)
		}
		if err := rec.skipBytes(); err != nil { // key
			return fail(i, err)
		}
		if err := rec.skipBytes(); err != nil { // value
			return fail(i, err)
		}
		headers, err := readVarint(&rec)
		if err != nil {
			return fail(i, err)
		}
		if headers < 0 {
			return fail(i, errMalformedRecord)
		}
		for j := int32(0); j < headers; j++ {
			if err := rec.skipBytes(); err != nil {
				return fail(i, err)
			}
			if err := rec.skipBytes(); err != nil {
				return fail(i, err)
			}
		}
		// Bytes the record's length covers past its last header are
		// ignored, as they always were here.
		if err := recs.skip(rec.left); err != nil {
			return fail(i, err)
		}
	}
	if _, err := recs.ReadByte(); err == nil {
		trailing := 1
		for {
			n, err := recs.Read(make([]byte, 32<<10))
			trailing += n
			if err != nil {
				break
			}
		}
		return corrupt("%d trailing bytes after %d records", trailing, count)
	} else if !errors.Is(err, io.EOF) {
		return corrupt("decompress (codec %d): %v", codec, err)
	}
	return nil
}

var errMalformedRecord = errors.New("malformed record")

// inRecord reads within one record's length.
type inRecord struct {
	recs *records
	left int
}

func (r *inRecord) ReadByte() (byte, error) {
	if r.left <= 0 {
		return 0, errMalformedRecord
	}
	b, err := r.recs.ReadByte()
	if err != nil {
		return 0, eofIsUnexpected(err)
	}
	r.left--
	return b, nil
}

// skipBytes skips a varint-length-prefixed byte string (key, value, header
// key or value); a negative length is null.
func (r *inRecord) skipBytes() error {
	n, err := readVarint(r)
	if err != nil || n <= 0 {
		return err
	}
	if int(n) > r.left {
		return errMalformedRecord
	}
	r.left -= int(n)
	return r.recs.skip(int(n))
}

// readVarint reads a zigzag varint of at most 5 bytes, as kbin.Varint:
// a longer one, or a fifth byte above 0x0f, is malformed.
func readVarint(r io.ByteReader) (int32, error) {
	var x uint32
	for i := 0; i < 5; i++ {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 {
				return 0, eofIsUnexpected(err)
			}
			return 0, err
		}
		if i == 4 {
			if b > 0x0f {
				return 0, errMalformedRecord
			}
			x |= uint32(b) << 28
			break
		}
		x |= uint32(b&0x7f) << (7 * i)
		if b < 0x80 {
			break
		}
	}
	return int32(x>>1) ^ -int32(x&1), nil
}

// readVarlong reads a zigzag varint of at most 10 bytes, as kbin.Varlong.
func readVarlong(r io.ByteReader) (int64, error) {
	var x uint64
	for i := 0; i < 10; i++ {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 {
				return 0, eofIsUnexpected(err)
			}
			return 0, err
		}
		if i == 9 {
			if b > 0x01 {
				return 0, errMalformedRecord
			}
			x |= uint64(b) << 63
			break
		}
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			break
		}
	}
	return int64(x>>1) ^ -int64(x&1), nil
}
