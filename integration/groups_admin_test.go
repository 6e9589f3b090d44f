package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
)

// `txncoord groups` against `txncoord up` with a real consumer group: list
// shows it, describe shows its member, committed offsets, log end offsets
// and lag (kafka-consumer-groups.sh's columns), delete is refused while it
// has members and succeeds once it is empty.
func TestGroupsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs processes")
	}
	up := startProc(t, "up", t.TempDir(), txncoordBinary(t), "up", "--data-dir", t.TempDir(), "--listen", upListen(t),
		"--admin-listen", upListen(t), "--topics", "in:2")
	bootstrap := bootstrapOf(t, up.ready)
	adminURL := regexp.MustCompile(`admin=(\S+)`).FindStringSubmatch(up.ready)[1]
	ctx := testCtx(t, 90*time.Second)

	prod, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup("audit"), kgo.ConsumeTopics("in"),
		kgo.ClientID("audit-1"), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// Consume 3 records of partition 0 and commit just those.
	var got []*kgo.Record
	for len(got) < 10 && ctx.Err() == nil {
		got = append(got, cons.PollFetches(ctx).Records()...)
	}
	var commit []*kgo.Record
	for _, r := range got {
		if r.Partition == 0 && len(commit) < 3 {
			commit = append(commit, r)
		}
	}
	if err := cons.CommitRecords(ctx, commit...); err != nil {
		t.Fatal(err)
	}

	cli := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, txncoordBinary(t), append(args, "--admin", adminURL)...).CombinedOutput()
		return string(out), err
	}
	out, err := cli("groups", "list")
	if err != nil || !regexp.MustCompile(`(?m)^audit\s+Stable\s+consumer`).MatchString(out) {
		t.Fatalf("groups list: %v\n%s", err, out)
	}
	out, err = cli("groups", "describe", "--group", "audit", "-o", "json")
	if err != nil {
		t.Fatalf("groups describe: %v\n%s", err, out)
	}
	var d admin.GroupDetail
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.State != "Stable" || d.MemberCount != 1 || len(d.Members) != 1 || d.Members[0].ClientID != "audit-1" || len(d.Members[0].Assignment) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	if len(d.Offsets) > 0 {
		d.Offsets[0].Metadata = "" // kgo commits its member id there
	}
	if len(d.Offsets) != 2 || d.Offsets[0] != (admin.GroupOffset{Topic: "in", Partition: 0, CurrentOffset: 3, LogEndOffset: 5, Lag: 2,
		MemberID: d.Members[0].MemberID, Host: d.Members[0].Host, ClientID: "audit-1"}) || d.Offsets[1].CurrentOffset != -1 || d.Offsets[1].LogEndOffset != 5 {
		t.Fatalf("offsets: %+v", d.Offsets)
	}
	out, err = cli("groups", "describe", "--group", "audit")
	if err != nil || !strings.Contains(out, "CURRENT-OFFSET  LOG-END-OFFSET  LAG") || !regexp.MustCompile(`(?m)^audit\s+in\s+0\s+3\s+5\s+2\s`).MatchString(out) {
		t.Fatalf("groups describe table: %v\n%s", err, out)
	}
	if out, err = cli("groups", "delete", "--group", "audit"); err == nil || !strings.Contains(out, "NON_EMPTY_GROUP") {
		t.Fatalf("delete with a member: %v\n%s", err, out)
	}
	cons.Close() // leaves the group
	if out, err = cli("groups", "delete", "--group", "audit"); err != nil {
		t.Fatalf("delete the empty group: %v\n%s", err, out)
	}
	if out, err = cli("groups", "describe", "--group", "audit"); err == nil || !strings.Contains(out, "group not found") {
		t.Fatalf("describe after delete: %v\n%s", err, out)
	}
	up.stop(t)
}
