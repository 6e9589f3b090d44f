package bench

import (
	"context"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnBatch decodes the raw driver's batch as a broker would: its
// length and CRC-32C hold, it is transactional, of the producer id, epoch
// and sequence given, and holds the one record with the value.
func TestTxnBatch(t *testing.T) {
	value := []byte("0123456789")
	raw := txnBatch(77, 3, 0, 1_700_000_000_000, value)
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if int(b.Length) != len(raw)-12 {
		t.Errorf("batch length %d, want %d", b.Length, len(raw)-12)
	}
	if want := int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))); b.CRC != want {
		t.Errorf("CRC %d, want %d", b.CRC, want)
	}
	if b.Magic != 2 || b.Attributes&0x10 == 0 || b.Attributes&0x20 != 0 || b.ProducerID != 77 || b.ProducerEpoch != 3 ||
		b.FirstSequence != 0 || b.NumRecords != 1 || b.LastOffsetDelta != 0 || b.FirstTimestamp != 1_700_000_000_000 {
		t.Fatalf("batch header %+v", b)
	}
	var rec kmsg.Record
	if err := rec.ReadFrom(b.Records); err != nil {
		t.Fatal(err)
	}
	if rec.Key != nil || string(rec.Value) != string(value) || len(rec.Headers) != 0 {
		t.Fatalf("record %+v", rec)
	}
}

// TestScaleProcsRaw runs the procs layout (three etcd member processes,
// three coordinator and three leader processes) with the raw driver and
// two kgo groups, SIGKILLs coordinator 1, and checks that every id and
// group was served before and after the kill, and that the report has a
// row for each process.
func TestScaleProcsRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("builds txncoord and runs nine processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work := t.TempDir()
	bin, err := txncoordBinary(ctx, "", work)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ScaleConfig{IDs: 30, Groups: 2, Interval: time.Second, Ramp: time.Minute, Window: 3 * time.Second,
		AfterKill: 30 * time.Second, KillNode: 1, Topic: "scale", GroupTopic: "scale-groups", Prefix: "t",
		ValueBytes: 10, StartRate: 100, Driver: DriverRaw, RawClients: 50, TxnStatePartitions: 50}
	l, err := startProcsLayout(ctx, selfCommand(t), bin, work, cfg.Topic, 6)
	if err != nil {
		t.Fatal(err)
	}
	defer l.stop()
	res, err := RunScale(ctx, l.server(), cfg, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReadyIDs != cfg.IDs || res.ReadyMembers != cfg.Groups*GroupMembers {
		t.Fatalf("served once before the window: %d ids, %d members", res.ReadyIDs, res.ReadyMembers)
	}
	if res.Txns == 0 || res.Commits == 0 || res.Etcd == nil || !(res.Etcd.ProposalsPerTxn > 0) {
		t.Fatalf("window: %d txns, %d offset commits, etcd %+v", res.Txns, res.Commits, res.Etcd)
	}
	k := res.Kill
	if k == nil || k.IDsLeft != 0 || k.GroupsLeft != 0 {
		t.Fatalf("after the SIGKILL: %+v (errors %v)", k, res.Errors)
	}
	if len(res.Procs) != procsEtcdMembers+procsCoordinators+procsLeaders {
		t.Fatalf("processes %+v", res.Procs)
	}
	for _, p := range res.Procs {
		if p.RSS <= 0 {
			t.Errorf("%s: RSS %d", p.Name, p.RSS)
		}
	}
	md := (&ScaleReport{Layout: "procs", Result: res}).Markdown()
	for _, want := range []string{"| coordinator-1 |", "| etcd-2 |", "| leader-5 |", "SIGKILL", "50 kgo clients"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	t.Logf("%d txns and %d offset commits in the window; kill → every id %v, every group %v",
		res.Txns, res.Commits, k.IDsServed, k.GroupsServed)
}
