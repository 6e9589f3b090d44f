package leaderstub

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/internal/logtest"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/wire"
)

// legacyMessage is one entry of a message set of magic 0 or 1 (the formats
// of Produce v0–v2), laid out as Kafka's LegacyRecord writes it: offset,
// size, CRC-32 (IEEE) of what follows, magic, attributes, a timestamp at
// magic 1, then key and value as int32-length bytes.
func legacyMessage(magic byte, offset int64, value string) []byte {
	body := []byte{magic, 0}
	if magic == 1 {
		body = binary.BigEndian.AppendUint64(body, uint64(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()))
	}
	body = binary.BigEndian.AppendUint32(body, 0xffffffff) // null key
	body = binary.BigEndian.AppendUint32(body, uint32(len(value)))
	body = append(body, value...)
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(4+len(body)))
	out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(body))
	return append(out, body...)
}

func legacySet(magic byte, values ...string) []byte {
	var out []byte
	for i, v := range values {
		out = append(out, legacyMessage(magic, int64(i), v)...)
	}
	return out
}

// A record set that is not a whole record batch v2 at its start gets
// Kafka 4.x's answer for that partition (ProduceRequest.validateRecords
// reading the first entry as ByteBufferLogInputStream does), at every
// version the handler serves, and nothing is appended: message sets of
// magic 0 and 1 are INVALID_RECORD, as are a truncated first entry and a
// set too short to hold one (no batch at all); an entry size below the
// smallest legacy entry and an unknown magic are CORRUPT_MESSAGE.
func TestProduceLegacyMessageSets(t *testing.T) {
	f := newFixture(t)
	good := testBatch{pid: -1, epoch: -1, seq: -1, count: 2}.bytes()
	withMagic := func(m byte) []byte {
		b := append([]byte(nil), good...)
		b[offMagic] = m
		return b
	}
	sized := func(size uint32, n int) []byte {
		b := make([]byte, n)
		binary.BigEndian.PutUint32(b[8:], size)
		if n > 16 {
			b[16] = 2
		}
		return b
	}
	cases := []struct {
		name    string
		records []byte
		want    int16
	}{
		{"magic 0 message set", legacySet(0, "a", "b"), kerr.InvalidRecord.Code},
		{"magic 1 message set", legacySet(1, "a"), kerr.InvalidRecord.Code},
		{"magic 1 first, then a v2 batch", append(legacySet(1, "a"), good...), kerr.InvalidRecord.Code},
		{"batch v2 header with magic 1", withMagic(1), kerr.InvalidRecord.Code},
		{"batch v2 header with magic 0", withMagic(0), kerr.InvalidRecord.Code},
		{"magic 3", withMagic(3), kerr.CorruptMessage.Code},
		{"magic -1", withMagic(0xff), kerr.CorruptMessage.Code},
		{"first entry truncated", good[:40], kerr.InvalidRecord.Code},
		{"shorter than offset and size", good[:11], kerr.InvalidRecord.Code},
		{"shorter than the magic byte", sized(30, 16), kerr.InvalidRecord.Code},
		{"entry size below 14", sized(13, 40), kerr.CorruptMessage.Code},
	}
	for _, version := range []int16{3, 9, 12} {
		for _, tc := range cases {
			resp := f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, tc.records), version).(*kmsg.ProduceResponse)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != tc.want || p.BaseOffset != -1 {
				t.Errorf("Produce v%d, %s: %s at offset %d, want %s", version, tc.name, codeName(p.ErrorCode), p.BaseOffset, codeName(tc.want))
			}
		}
	}
	if end := f.logEnd(); end != 0 {
		t.Fatalf("log end %d after refused record sets, want 0", end)
	}
	// The same partition takes a batch v2 afterwards.
	resp := f.call(f.l.handleProduce, produceReq("t", 0, nil, -1, good), 3).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("batch v2 after the refusals: %s at offset %d", codeName(p.ErrorCode), p.BaseOffset)
	}
}

// loggedLeader is a leader of the given profile on its own wire server,
// with a fake coordinator, whose server log is kept for assertions.
type loggedLeader struct {
	addr string
	logs *logtest.Buffer
	l    *Leader
}

func startLoggedLeader(t *testing.T, version string) *loggedLeader {
	t.Helper()
	coordLn, leaderLn := listen(t), listen(t)
	f := testFile([]cluster.Node{{NodeID: 1, Addr: leaderLn.Addr().String(), KafkaVersion: version}}, map[string]int32{"t": 1, "u": 2})
	f.Coordinator.Addr = coordLn.Addr().String()
	view := cluster.NewView(f)
	startFakeCoordinator(t, coordLn, view, 5, 5)
	ll := &loggedLeader{addr: leaderLn.Addr().String(), logs: &logtest.Buffer{}}
	l, err := Open(Config{NodeID: 1, KafkaVersion: version, View: view, DataDir: t.TempDir(),
		Coordinator: coordclient.Dial(coordLn.Addr().String(), ll.logs.Logger()), Log: ll.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ll.l = l
	reg := wire.NewRegistry()
	view.RegisterMetadata(reg)
	view.RegisterFindCoordinator(reg)
	l.Register(reg)
	prof, _ := negotiation.Profile(version)
	srv, err := wire.Start(wire.Config{Listener: leaderLn, Registry: reg, Profile: prof, Log: ll.logs.Logger(),
		Features: func() wire.Features { return view.Features(version) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(srv); l.Close() })
	return ll
}

// refusals are the server's log lines for a Produce refused at its
// header, as Kafka 4.x refuses v0–v2.
func (ll *loggedLeader) refusals(clientID string) []map[string]any {
	return ll.logs.Lines(map[string]any{"level": "info", "api_key": float64(0), "client_id": clientID,
		"message": "connection closed: advertised but refused request version, as Kafka 4.x does"})
}

func (ll *loggedLeader) logEnd(t *testing.T, topic string, partition int32) int64 {
	t.Helper()
	p, kerrE := ll.l.partitionFor(topic, partition)
	if kerrE != nil {
		t.Fatal(kerrE)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.nextOffset
}

// A leader advertises Produce from v0 to librdkafka (which compresses
// only when Produce v0 is advertised, KAFKA-18659) and from v3 to others,
// and Fetch from v4, as Kafka 4.x does (wire/refused.go). Over TCP: Produce v0, v1 and v2 close the connection
// without an answer, with one info line naming the client and the
// version, and append nothing; a magic 1 message set in Produce v3 is
// INVALID_RECORD on a connection that stays open; Fetch v3, below the
// advertised range, closes the connection as Kafka's header check does.
func TestProduceVersionsOverTCP(t *testing.T) {
	for _, tc := range []struct {
		profile                string
		produceMax, fetchMax   int16
		produceMin, fetchMinOK int16
	}{
		{"4.2", 13, 18, 3, 4}, // wire.Client is not librdkafka: shown what is accepted
		{"4.0", 12, 17, 3, 4},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			ll := startLoggedLeader(t, tc.profile)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			dial := func() *wire.Client {
				cl, err := wire.Dial(ctx, ll.addr, "pinned-test")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cl.Close() })
				return cl
			}
			cl := dial()
			av, err := cl.ApiVersions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ranges := map[int16][2]int16{}
			for _, k := range av.ApiKeys {
				ranges[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
			}
			if got, want := ranges[0], [2]int16{tc.produceMin, tc.produceMax}; got != want {
				t.Fatalf("Produce advertised v%d–v%d, want v%d–v%d", got[0], got[1], want[0], want[1])
			}
			if got, want := ranges[1], [2]int16{tc.fetchMinOK, tc.fetchMax}; got != want {
				t.Fatalf("Fetch advertised v%d–v%d, want v%d–v%d", got[0], got[1], want[0], want[1])
			}

			// Produce v3 with a magic 1 message set: INVALID_RECORD,
			// and the connection goes on.
			legacy := produceReq("t", 0, nil, -1, legacySet(1, "old-1", "old-2"))
			legacy.SetVersion(3)
			resp, err := cl.Do(ctx, legacy)
			if err != nil {
				t.Fatalf("Produce v3 with a magic 1 message set: %v", err)
			}
			if p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidRecord.Code {
				t.Fatalf("Produce v3 with a magic 1 message set: %s, want INVALID_RECORD", codeName(p.ErrorCode))
			}
			good := produceReq("t", 0, nil, -1, testBatch{pid: -1, epoch: -1, seq: -1}.bytes())
			good.SetVersion(3)
			resp, err = cl.Do(ctx, good)
			if err != nil || resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].BaseOffset != 0 {
				t.Fatalf("Produce v3 with a batch v2 on the same connection: %v %v", resp, err)
			}

			for v := int16(0); v <= 2; v++ {
				c := dial()
				req := produceReq("t", 0, nil, -1, legacySet(1, "refused"))
				req.SetVersion(v)
				if resp, err := c.Do(ctx, req); !errors.Is(err, io.EOF) {
					t.Fatalf("Produce v%d: %v, %v; want the connection closed (EOF) without an answer", v, resp, err)
				}
				lines := ll.refusals("pinned-test")
				if len(lines) != int(v)+1 || lines[v]["api_version"] != float64(v) {
					t.Fatalf("after Produce v%d: refusal lines %v, want one per refused request naming its version", v, lines)
				}
			}
			if end := ll.logEnd(t, "t", 0); end != 1 {
				t.Fatalf("log end %d, want 1: only the batch v2 was appended", end)
			}

			fetch := kmsg.NewPtrFetchRequest()
			fetch.SetVersion(3)
			if resp, err := dial().Do(ctx, fetch); !errors.Is(err, io.EOF) {
				t.Fatalf("Fetch v3: %v, %v; want the connection closed (EOF)", resp, err)
			}
		})
	}
}

// Clients pinned to Kafka 0.10.2 get what Kafka 4.x gives them: metadata
// loads (Metadata v2), but Produce v2 has its connection closed, and
// Fetch v3 is below the advertised range. Observed, each within a bounded
// context:
//   - kgo (kversion.V0_10_2): it is shown Produce from v3 (it is not
//     librdkafka), so its Produce v2 fails locally with "broker is too
//     old", at once, as against kfake (franz-go's
//     TestIssueProduceBrokerTooOldFailsRecords); nothing reaches the
//     server; its Fetch fails locally the same way, since v3 is below the
//     advertised v4;
//   - sarama (V0_10_2_0): its SyncProducer gets io.EOF once its retries
//     (3) are spent; its partition consumer reports an EOF error.
//
// Nothing is appended.
func TestClientsPinnedTo0102(t *testing.T) {
	ll := startLoggedLeader(t, "4.2")

	// kgo.
	var mu sync.Mutex
	var produceReadErrs []error
	hook := brokerReadHook(func(key int16, err error) {
		if key == 0 && err != nil {
			mu.Lock()
			produceReadErrs = append(produceReadErrs, err)
			mu.Unlock()
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(ll.addr), kgo.MaxVersions(kversion.V0_10_2()), kgo.ClientID("kgo-0.10.2"),
		kgo.DefaultProduceTopic("t"), kgo.WithHooks(hook), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil || md.GetVersion() != 2 || len(md.(*kmsg.MetadataResponse).Topics) < 2 {
		t.Fatalf("kgo pinned to 0.10.2: Metadata %v, %v; want v2 with the topics", md, err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	start := time.Now()
	err = cl.ProduceSync(pctx, &kgo.Record{Value: []byte("kgo-pinned")}).FirstErr()
	pcancel()
	t.Logf("kgo produce answered %v after %v", err, time.Since(start))
	if err == nil || !strings.Contains(err.Error(), "broker is too old") {
		t.Fatalf("kgo pinned to 0.10.2: produce: %v, want kgo's local \"broker is too old\" (Produce shown from v3)", err)
	}
	mu.Lock()
	readErrs := append([]error(nil), produceReadErrs...)
	mu.Unlock()
	if len(readErrs) != 0 {
		t.Fatalf("kgo sent Produce (read errors %v): it should have refused locally", readErrs)
	}
	if lines := ll.refusals("kgo-0.10.2"); len(lines) != 0 {
		t.Fatalf("refusals logged for kgo %v: nothing should have been sent", lines)
	}
	if _, err := cl.Broker(1).Request(ctx, kmsg.NewPtrFetchRequest()); err == nil || !strings.Contains(err.Error(), "broker is too old") {
		t.Fatalf("kgo pinned to 0.10.2: Fetch: %v, want kgo's local \"broker is too old\" (v3 is below the advertised v4)", err)
	}

	// sarama.
	conf := sarama.NewConfig()
	conf.Version = sarama.V0_10_2_0
	conf.ClientID = "sarama-0.10.2"
	conf.Producer.Return.Successes = true
	conf.Consumer.Return.Errors = true
	sc, err := sarama.NewClient([]string{ll.addr}, conf)
	if err != nil {
		t.Fatalf("sarama V0_10_2_0: %v", err)
	}
	defer sc.Close()
	if parts, err := sc.Partitions("u"); err != nil || len(parts) != 2 {
		t.Fatalf("sarama V0_10_2_0: partitions of u %v, %v", parts, err)
	}
	p, err := sarama.NewSyncProducerFromClient(sc)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "t", Partition: 0, Value: sarama.StringEncoder("sarama-pinned")})
	p.Close()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("sarama V0_10_2_0: produce: %v, want io.EOF (the broker closes the connection)", err)
	}
	if n := len(ll.refusals("sarama-0.10.2")); n != conf.Producer.Retry.Max+1 {
		t.Fatalf("%d refusals logged for sarama, want %d (the first attempt and each retry)", n, conf.Producer.Retry.Max+1)
	}
	c, err := sarama.NewConsumerFromClient(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition("t", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama V0_10_2_0: ConsumePartition: %v", err)
	}
	defer pc.Close()
	select {
	case cerr := <-pc.Errors():
		if !errors.Is(cerr, io.EOF) {
			t.Fatalf("sarama V0_10_2_0: consume: %v, want io.EOF (Fetch v3 closes the connection)", cerr)
		}
	case m := <-pc.Messages():
		t.Fatalf("sarama V0_10_2_0: consumed %v from an empty partition", m)
	case <-ctx.Done():
		t.Fatal("sarama V0_10_2_0: no consume error")
	}
	if end := ll.logEnd(t, "t", 0); end != 0 {
		t.Fatalf("log end %d, want 0", end)
	}
}

// brokerReadHook is a kgo HookBrokerRead.
type brokerReadHook func(key int16, err error)

func (h brokerReadHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	h(key, err)
}
