package node

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRetentionSweepEmbedded: EmbeddedConfig.RetentionCheckInterval
// reaches the leaders: a partition written with hour-old records under
// the default retention, then given retention.ms=60000 and left idle, has
// them deleted by the sweep (ListStartOffsets moves) with no further write.
func TestRetentionSweepEmbedded(t *testing.T) {
	f, lns := twoLeaderFile(t)
	e, err := StartEmbedded(EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: lns, Log: zerolog.Nop(),
		RetentionCheckInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, e.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bootstrap()), kgo.DefaultProduceTopic("r"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if c, err := adm.CreateTopic(ctx, 1, -1, nil, "r"); err != nil || c.Err != nil {
		t.Fatalf("create r: %v %v", err, c.Err)
	}
	old := time.Now().Add(-time.Hour)
	for range 3 { // three batches; the last one always stays
		if err := cl.ProduceSync(ctx, &kgo.Record{Timestamp: old, Value: []byte("old")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if o := listStart(ctx, t, adm); o != 0 {
		t.Fatalf("log start %d before retention.ms is set, want 0", o)
	}
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("60000")}}, "r")
	if err != nil || alt[0].Err != nil {
		t.Fatalf("set retention.ms: %v %v", err, alt)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		o := listStart(ctx, t, adm)
		if o == 2 {
			return
		}
		if o > 2 || time.Now().After(deadline) {
			t.Fatalf("log start %d, want 2 (the sweep deletes every expired batch but the last)", o)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func listStart(ctx context.Context, t *testing.T, adm *kadm.Client) int64 {
	t.Helper()
	starts, err := adm.ListStartOffsets(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := starts.Lookup("r", 0)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	return o.Offset
}
