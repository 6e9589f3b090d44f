package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrowserRecords: kgo commits one transaction, aborts another and
// leaves a third open, each with a record on partitions 0 and 1. The
// topic view lists partition 0's producers, the open one with its first
// offset; the record browser, read_uncommitted, marks the aborted record,
// the COMMIT and ABORT control records and the open record; read_committed
// stops at the open transaction and still marks the aborted data.
func TestBrowserRecords(t *testing.T) {
	ctx := browser(t)
	c := startCluster(t, true)
	c.txn(t, "rec-commit", "commit")
	c.waitComplete(t, "rec-commit") // the offsets below put each marker before the next producer's record
	c.txn(t, "rec-abort", "abort")
	c.waitComplete(t, "rec-abort")
	c.txn(t, "rec-open", "")
	base := c.e.Admin.URL()

	run(t, ctx, "topic view", chromedp.Navigate(base+"/#/topic/orders"))
	waitJS(t, ctx, "partition 0's producers, one open from offset 4", `(() => {
		const cell = document.querySelector('tr[data-partition="0"] td.producers');
		return !!cell && (cell.textContent.match(/pid /g) || []).length === 3 && cell.textContent.includes('open from 4') })()`)
	screenshot(t, ctx, "topic-producers")

	run(t, ctx, "record browser", chromedp.Navigate(base+"/#/records/orders/0"))
	// Offsets on partition 0: 0 committed, 1 COMMIT, 2 aborted, 3 ABORT,
	// 4 open.
	want := `(() => {
		const row = (o) => document.querySelector('#records-table tr[data-offset="' + o + '"]');
		const is = (o, attr, v) => row(o)?.getAttribute(attr) === v;
		return is(0, 'data-txn', 'committed') && is(1, 'data-control', 'COMMIT') && is(2, 'data-txn', 'aborted') && row(2).classList.contains('aborted')
			&& row(2).textContent.includes('rec-abort') && is(3, 'data-control', 'ABORT') && row(3).classList.contains('control') %s })()`
	waitJS(t, ctx, "read_uncommitted: markers, aborted and open data", sprintf(want, `&& is(4, 'data-txn', 'open')`))
	screenshot(t, ctx, "records")
	run(t, ctx, "read_committed", chromedp.SetValue(chromedp.CSS("#r-isolation"), "read_committed"), change("#r-isolation"))
	waitJS(t, ctx, "read_committed: up to the LSO, aborted data still marked", sprintf(want,
		`&& !row(4) && document.getElementById('records-facts').textContent.includes('read_committed')`))
	screenshot(t, ctx, "records-read-committed")
}

// TestBrowserFaults: a fault added from the console's form is active in
// the admin API and listed; its Clear button ends it.
func TestBrowserFaults(t *testing.T) {
	ctx := browser(t)
	c := startCluster(t, true)
	base := c.e.Admin.URL()
	run(t, ctx, "faults view", chromedp.Navigate(base+"/#/faults"))
	waitJS(t, ctx, "the form and an empty list", `!!document.getElementById('fault-form') && document.querySelectorAll('#faults-table tr[data-fault]').length === 0`)
	run(t, ctx, "fill the form",
		chromedp.SetValue(chromedp.CSS("#fault-kind"), "error"), chromedp.SetValue(chromedp.CSS("#fault-node"), "1"),
		chromedp.SetValue(chromedp.CSS("#fault-api_key"), "0"), chromedp.SetValue(chromedp.CSS("#fault-error_code"), "6"),
		chromedp.SetValue(chromedp.CSS("#fault-for"), "10m"))
	run(t, ctx, "add", click("#fault-add"))
	waitJS(t, ctx, "listed", `(() => { const tr = document.querySelector('#faults-table tr[data-fault]');
		return !!tr && tr.textContent.includes('error') && document.getElementById('fault-result').textContent.startsWith('Fault ') })()`)
	if n := activeFaults(t, base); n != 1 {
		t.Fatalf("admin API after the console's add: %d faults, want 1", n)
	}
	screenshot(t, ctx, "faults")
	run(t, ctx, "clear it", click("#faults-table .fault-clear"))
	waitJS(t, ctx, "gone", `document.querySelectorAll('#faults-table tr[data-fault]').length === 0 && document.getElementById('fault-result').textContent.endsWith('cleared.')`)
	if n := activeFaults(t, base); n != 0 {
		t.Fatalf("admin API after the console's clear: %d faults, want 0", n)
	}
}

// TestBrowserShareGroup: a kgo share group member acknowledges some of a
// topic's records; the groups view lists the group as a share group and its
// page shows each share partition with its lag.
func TestBrowserShareGroup(t *testing.T) {
	ctx := browser(t)
	c := startCluster(t, true)
	base := c.e.Admin.URL()
	cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kgoClient(t, c.bootstrap)
	setGroupConfig(t, cctx, cl, "console-share", "share.auto.offset.reset", "earliest")
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(cctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("s")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap), kgo.ShareGroup("console-share"), kgo.ConsumeTopics("orders"), kgo.ShareMaxRecords(5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Close)
	for got := 0; got < 5 && cctx.Err() == nil; {
		member.PollRecords(cctx, 5).EachRecord(func(r *kgo.Record) { got++; r.Ack(kgo.AckAccept) })
	}
	if err := member.FlushAcks(cctx); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "groups", chromedp.Navigate(base+"/#/groups"))
	waitJS(t, ctx, "a share group", `[...document.querySelectorAll('main tbody tr')].some(tr => tr.textContent.includes('console-share') && tr.textContent.includes('share'))`)
	run(t, ctx, "its page", chromedp.Navigate(base+"/#/group/console-share"))
	// The 20 records went to one partition (kgo's sticky partitioner);
	// the member took 5 of them; a partition the member has not fetched
	// from yet has no share partition to show (the lag is 15 once their acknowledgements
	// are applied, 20 before).
	waitJS(t, ctx, "each partition with its lag", `(() => { const lags = [...document.querySelectorAll('tr[data-share] .lag')].map(td => Number(td.textContent));
		return lags.length >= 1 && lags.every(l => !isNaN(l)) && lags.filter(l => l > 0).length === 1 && lags.some(l => l > 0 && l <= 20) })()`)
	screenshot(t, ctx, "share-group")
}

func activeFaults(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/v1/faults")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Faults []struct{ ID uint64 } `json:"faults"`
	}
	if err := jsonDecode(resp, &list); err != nil {
		t.Fatal(err)
	}
	return len(list.Faults)
}

// setGroupConfig sets a group's configs (IncrementalAlterConfigs), as
// kafka-configs.sh --entity-type groups does.
func setGroupConfig(t *testing.T, ctx context.Context, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kvs); i += 2 {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, cfg)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("IncrementalAlterConfigs %v: %v", kvs, err)
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
