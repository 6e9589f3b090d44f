package leaderstub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawReader reads a Kafka response body field by field, as librdkafka's
// rd_kafka_buf_read_* macros do: no generated decoder, so what kmsg writes
// is checked byte by byte.
type rawReader struct {
	b   []byte
	err error
}

func (r *rawReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("need %d bytes, have %d", n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *rawReader) i16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *rawReader) i32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *rawReader) i64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *rawReader) uvarint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return int64(v)
}

// arrayLen: int32, or (flexible) uvarint N+1 with 0 meaning null.
func (r *rawReader) arrayLen(flexible bool) int64 {
	if flexible {
		return r.uvarint() - 1
	}
	return int64(r.i32())
}

func (r *rawReader) str(flexible bool) {
	if flexible {
		r.take(int(r.uvarint() - 1))
		return
	}
	r.take(int(r.i16()))
}

func (r *rawReader) tags(flexible bool) {
	if !flexible {
		return
	}
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		r.uvarint() // tag
		r.take(int(r.uvarint()))
	}
}

// messageSetSizes decodes a Fetch response body of version v and returns
// each partition's MessageSetSize as librdkafka reads it (int32, or for
// flexible versions the compact length N+1 minus one): -1 is a null
// record set, which librdkafka rejects ("invalid MessageSetSize -1").
func messageSetSizes(body []byte, v int16) ([]int64, error) {
	r := &rawReader{b: body}
	flex := v >= 12
	r.i32() // ThrottleMillis
	if v >= 7 {
		r.i16() // ErrorCode
		r.i32() // SessionID
	}
	var sizes []int64
	for nt := r.arrayLen(flex); nt > 0 && r.err == nil; nt-- {
		if v >= 13 {
			r.take(16) // TopicID
		} else {
			r.str(flex)
		}
		for np := r.arrayLen(flex); np > 0 && r.err == nil; np-- {
			r.i32() // Partition
			r.i16() // ErrorCode
			r.i64() // HighWatermark
			r.i64() // LastStableOffset
			if v >= 5 {
				r.i64() // LogStartOffset
			}
			for na := r.arrayLen(flex); na > 0 && r.err == nil; na-- {
				r.i64() // ProducerID
				r.i64() // FirstOffset
				r.tags(flex)
			}
			if v >= 11 {
				r.i32() // PreferredReadReplica
			}
			size := r.arrayLen(flex) // same encoding as a length
			sizes = append(sizes, size)
			if size > 0 {
				r.take(int(size))
			}
			r.tags(flex)
		}
		r.tags(flex)
	}
	r.tags(flex)
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes left over", len(r.b))
	}
	return sizes, r.err
}

// TestFetchEmptyPartitionRecordSetNotNull: at every Fetch version, an empty
// partition, a partition with an error and a partition with data all carry
// a record set of length >= 0, read from the encoded bytes the way
// librdkafka reads them (kcat -C -e looped on "invalid MessageSetSize -1"
// with a null one, and never reached partition EOF).
func TestFetchEmptyPartitionRecordSetNotNull(t *testing.T) {
	f := newFixture(t)
	topic, _ := f.view.Topic("t")
	for v := fetchAPI.Min; v <= fetchAPI.Max; v++ {
		for _, isolation := range []int8{0, 1} {
			req := kmsg.NewPtrFetchRequest()
			req.MaxBytes, req.IsolationLevel = 1<<20, isolation
			req.SessionEpoch = -1 // no session: every partition is answered
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "t", topic.ID
			for _, p := range []int32{0, 7} { // 7: no such partition (an error)
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = p, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			resp := f.call(f.l.handleFetch, req, v).(*kmsg.FetchResponse)
			sizes, err := messageSetSizes(resp.AppendTo(nil), v)
			if err != nil {
				t.Fatalf("v%d isolation %d: decoding as librdkafka: %v", v, isolation, err)
			}
			if len(sizes) != 2 || sizes[0] != 0 || sizes[1] != 0 {
				t.Fatalf("v%d isolation %d: MessageSetSizes %v, want [0 0] (empty, error)", v, isolation, sizes)
			}
		}
	}
	// With data the size is the batch's.
	raw := testBatch{pid: -1, epoch: -1, seq: -1}.bytes()
	f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, raw), 9)
	for _, v := range []int16{4, 11, 12, 18} {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.SessionEpoch = 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "t", topic.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := f.call(f.l.handleFetch, req, v).(*kmsg.FetchResponse)
		sizes, err := messageSetSizes(resp.AppendTo(nil), v)
		if err != nil || len(sizes) != 1 || sizes[0] != int64(len(raw)) {
			t.Fatalf("v%d with data: sizes %v err %v, want [%d]", v, sizes, err, len(raw))
		}
	}
}
