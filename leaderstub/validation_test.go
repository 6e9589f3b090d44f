package leaderstub

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDataDriven replays every testdata/*.txt scenario against a fresh
// leader. Commands:
//
//	produce pid= epoch= seq= [txn] [count=] [version=] [txnid=]   → error and base offset
//	marker pid= epoch= coord= commit|abort [tv=] [v=]             → error, control batch offset
//	state pid=                                                    → the producer's entry
//	offsets                                                       → log start, HW, LSO, aborted index
//	log                                                           → every stored batch
//	restart                                                       → close and reopen the store
//	coordinator                                                   → AddPartitionsToTxn calls so far
func TestDataDriven(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f := newFixture(t)
			runDataDriven(t, path, f.runCmd)
		})
	}
}

func (f *fixture) runCmd(t *testing.T, d *ddCmd) string {
	switch d.Name {
	case "produce":
		b := testBatch{pid: d.int(t, "pid", -1), epoch: int16(d.int(t, "epoch", -1)), seq: int32(d.int(t, "seq", -1)),
			txn: d.has("txn"), count: int(d.int(t, "count", 1)), ts: f.now.UnixMilli(), payload: "v"}
		var txnID *string
		if b.txn {
			id := d.str("txnid", "txn-a")
			txnID = &id
		}
		version := int16(d.int(t, "version", 12))
		req := produceReq("t", 0, txnID, -1, b.bytes())
		if version >= 13 {
			topic, _ := f.view.Topic("t")
			req.Topics[0].TopicID = topic.ID
		}
		resp := f.call(f.l.handleProduce, req, version).(*kmsg.ProduceResponse)
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			return codeName(rp.ErrorCode)
		}
		return fmt.Sprintf("NONE offset=%d", rp.BaseOffset)
	case "marker":
		version := int16(d.int(t, "v", 2))
		req := markerReq(d.int(t, "pid", 1), int16(d.int(t, "epoch", 0)), d.has("commit"), int32(d.int(t, "coord", 0)),
			int8(d.int(t, "tv", 2)), "t", 0)
		before := f.logEnd()
		resp := f.call(f.l.handleWriteTxnMarkers, req, version).(*kmsg.WriteTxnMarkersResponse)
		code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode
		if after := f.logEnd(); after != before {
			return fmt.Sprintf("%s control-batch=%d", codeName(code), before)
		}
		return codeName(code) + " no-batch"
	case "state":
		p, _ := f.l.partitionFor("t", 0)
		p.mu.RLock()
		e, ok := p.producers[d.int(t, "pid", 1)]
		p.mu.RUnlock()
		if !ok {
			return "none"
		}
		return fmt.Sprintf("epoch=%d coord=%d txn_start=%d last_seq=%d", e.Epoch, e.CoordinatorEpoch, e.TxnFirstOffset, e.lastSeq())
	case "offsets":
		p, _ := f.l.partitionFor("t", 0)
		p.mu.RLock()
		defer p.mu.RUnlock()
		var ab []string
		for _, a := range p.aborted {
			ab = append(ab, fmt.Sprintf("pid=%d:%d-%d(lso=%d)", a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset))
		}
		return fmt.Sprintf("log_start=%d hw=%d lso=%d aborted=[%s]", p.logStart, p.hw, p.lso(), strings.Join(ab, " "))
	case "log":
		return f.dumpLog(t)
	case "restart":
		f.restart()
		return "ok"
	case "coordinator":
		f.coord.mu.Lock()
		defer f.coord.mu.Unlock()
		var out []string
		for _, c := range f.coord.calls {
			for _, tx := range c.Transactions {
				var parts []string
				for _, tt := range tx.Topics {
					parts = append(parts, fmt.Sprintf("%s%v", tt.Topic, tt.Partitions))
				}
				out = append(out, fmt.Sprintf("AddPartitionsToTxn txn=%s pid=%d epoch=%d verify_only=%v %s",
					tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly, strings.Join(parts, ",")))
			}
		}
		if len(out) == 0 {
			return "no calls"
		}
		return strings.Join(out, "\n")
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Name)
	return ""
}

func (f *fixture) logEnd() int64 {
	p, _ := f.l.partitionFor("t", 0)
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.nextOffset
}

// dumpLog reads every stored batch back through Fetch (read_uncommitted)
// and prints headers; control batches print their decoded marker.
func (f *fixture) dumpLog(t *testing.T) string {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	p, _ := f.l.partitionFor("t", 0)
	p.mu.RLock()
	rp.FetchOffset = p.logStart
	p.mu.RUnlock()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := f.call(f.l.handleFetch, req, 11).(*kmsg.FetchResponse)
	raw := resp.Topics[0].Partitions[0].RecordBatches
	var out []string
	for len(raw) > 0 {
		h, n, err := parseHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		base := int64(binary.BigEndian.Uint64(raw))
		line := fmt.Sprintf("%d-%d pid=%d epoch=%d", base, base+int64(h.LastOffsetDelta), h.ProducerID, h.ProducerEpoch)
		if h.transactional() {
			line += " txn"
		}
		if h.control() {
			body := raw[batchHeaderLen:n]
			// record: len, attrs, tsDelta, offDelta, keyLen(4)=0x08, key...
			key := body[5:9]
			val := body[10:16]
			typ := "ABORT"
			if binary.BigEndian.Uint16(key[2:]) == 1 {
				typ = "COMMIT"
			}
			line += fmt.Sprintf(" control=%s coord=%d", typ, int32(binary.BigEndian.Uint32(val[2:])))
		}
		out = append(out, line)
		raw = raw[n:]
	}
	sort.Strings(nil)
	if len(out) == 0 {
		return "empty"
	}
	return strings.Join(out, "\n")
}
