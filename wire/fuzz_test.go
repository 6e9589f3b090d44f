package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzMaxFrame keeps the fuzzer's frames small; the size check itself is
// the same code the server runs with its real limit.
const fuzzMaxFrame = 1 << 20

// seedFrames are valid length-prefixed request frames of the keys and
// versions real clients and txncoord's nodes send.
func seedFrames() [][]byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	var out [][]byte
	add := func(req kmsg.Request, v int16) {
		req.SetVersion(v)
		out = append(out, f.AppendRequest(nil, req, int32(len(out)+1)))
	}
	for _, v := range []int16{0, 3, 4, 5} {
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion = "kgo", "1.0"
		add(av, v)
	}
	for _, v := range []int16{4, 6, 9, 12, 13} {
		md := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr("orders")
		md.Topics = append(md.Topics, t)
		md.AllowAutoTopicCreation = true
		add(md, v)
	}
	for _, v := range []int16{0, 3, 4, 6} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorType = "txn-1", 1
		fc.CoordinatorKeys = []string{"txn-1", "txn-2"}
		add(fc, v)
	}
	for _, v := range []int16{1, 2} {
		m := kmsg.NewPtrWriteTxnMarkersRequest()
		mk := kmsg.NewWriteTxnMarkersRequestMarker()
		mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch, mk.TransactionVersion = 7, 3, true, 1, 2
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "orders", []int32{0, 2}
		mk.Topics = append(mk.Topics, mt)
		m.Markers = append(m.Markers, mk)
		add(m, v)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID = kmsg.StringPtr("txn-1")
	ip.TransactionTimeoutMillis = 60000
	add(ip, 5)
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = "txn-1", 7, 3, true
	add(et, 5)
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID = "txn-1", 7
	add(ap, 3)
	pr := kmsg.NewPtrProduceRequest()
	pr.TransactionID, pr.Acks, pr.TimeoutMillis = kmsg.StringPtr("txn-1"), -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = bytes.Repeat([]byte{1}, 61)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	add(pr, 9)
	add(kmsg.NewPtrDescribeProducersRequest(), 0)
	// A KIP-511 probe: ApiVersions at a version kmsg does not know.
	probe := f.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 99)
	binary.BigEndian.PutUint16(probe[6:], 9)
	out = append(out, probe)
	return out
}

// FuzzParseRequest feeds arbitrary bytes through what the server does with
// a connection's bytes: the length prefix check, the request header, and
// body decoding with kmsg. Nothing may panic. A body that decodes must
// survive a round trip: re-encoding it and decoding the result gives the
// same header and the same encoding again.
func FuzzParseRequest(f *testing.F) {
	for _, frame := range seedFrames() {
		f.Add(frame)
	}
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xf0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		if len(stream) < 4 {
			return
		}
		size := int32(binary.BigEndian.Uint32(stream))
		if checkFrameSize(size, fuzzMaxFrame) != nil {
			return
		}
		if int(size) > len(stream)-4 {
			return // the server would wait for the rest
		}
		frame := stream[4 : 4+size]
		h, body, err := parseHeader(frame)
		if err != nil {
			return
		}
		req := kmsg.RequestForKey(h.key)
		if req == nil || h.version < 0 || h.version > req.MaxVersion() {
			// The server closes the connection before decoding:
			// registered ranges never exceed kmsg's.
			return
		}
		decoded, err := decodeBody(h, body)
		if err != nil {
			return
		}
		if h.key == 7 && h.version == 0 {
			// kmsg's RequestFormatter writes ControlledShutdown v0
			// without its body or length; txncoord never serves it.
			return
		}
		first := reencode(h, decoded)
		h2, body2, err := parseHeader(first[4:])
		if err != nil {
			t.Fatalf("re-encoded header does not parse: %v", err)
		}
		if h2.key != h.key || h2.version != h.version || h2.correlationID != h.correlationID || !sameClientID(h.clientID, h2.clientID) {
			t.Fatalf("header changed in round trip: %+v → %+v", h, h2)
		}
		again, err := decodeBody(h2, body2)
		if err != nil {
			t.Fatalf("re-encoded body does not decode: %v", err)
		}
		if second := reencode(h2, again); !bytes.Equal(first, second) {
			t.Fatalf("encoding not stable:\n%x\n%x", first, second)
		}
	})
}

func reencode(h header, req kmsg.Request) []byte {
	var opts []kmsg.RequestFormatterOpt
	if h.clientID != nil {
		opts = append(opts, kmsg.FormatterClientID(*h.clientID))
	}
	return kmsg.NewRequestFormatter(opts...).AppendRequest(nil, req, h.correlationID)
}

func sameClientID(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
