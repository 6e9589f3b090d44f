package console_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/node"
)

// The browser tests drive the console in headless Chromium (chromedp)
// against an embedded cluster with real kgo transactions. They run when
// TXNCOORD_BROWSER_TESTS=1 (make interop sets it and installs Debian's
// chromium); plain `go test` skips them saying so. With
// TXNCOORD_CONSOLE_SCREENSHOTS=DIR they save a PNG of each view there
// (the README's docs/console/).

// browser starts headless Chromium, or skips (fails when the browser
// tests were asked for and there is no Chromium).
func browser(t *testing.T) context.Context {
	t.Helper()
	if os.Getenv("TXNCOORD_BROWSER_TESTS") != "1" {
		t.Skip("browser test: set TXNCOORD_BROWSER_TESTS=1 to run it in headless Chromium (make interop does)")
	}
	path := os.Getenv("TXNCOORD_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path != "" {
			break
		}
		path, _ = exec.LookPath(name)
	}
	if path == "" {
		t.Fatal("TXNCOORD_BROWSER_TESTS=1 but no chromium in PATH (apt-get install -y chromium, or set TXNCOORD_CHROMIUM)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser, for the context's whole life: no
	// timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// run runs chromedp steps with a bound.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval is the value of a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until the page's expression is true.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	for range 3 {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(25*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
		// A poll that started in the document a navigation just
		// replaced loses its JavaScript context: ask the new one.
		if err == nil || !strings.Contains(err.Error(), "Cannot find context with specified id") {
			break
		}
	}
	if err != nil {
		html, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](`document.getElementById('main').innerText`))
		t.Fatalf("%s: %v; the page shows:\n%s", what, err, html)
	}
}

// screenshot saves the page as DIR/name.png when asked for.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("TXNCOORD_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

type testCluster struct {
	e         *node.Embedded
	bootstrap string
}

// startCluster runs a coordinator and two leaders (4.2 and 4.1) with the
// topic orders (3 partitions) and the admin API. discovery is
// --marker-version-discovery (up's default true; false reproduces Kafka
// 4.2.0's hang: v2 markers to the 4.1 leader, which get stuck).
func startCluster(t *testing.T, discovery bool) testCluster {
	t.Helper()
	return startClusterWith(t, discovery, map[string]int32{"orders": 3})
}

// startClusterWith is startCluster with these topics.
func startClusterWith(t *testing.T, discovery bool, topics map[string]int32) testCluster {
	t.Helper()
	lns := map[int32]net.Listener{}
	for i := int32(0); i < 3; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	spec := node.EmbeddedSpec{Listen: lns[0].Addr().String(), CoordinatorVersion: "4.2", LeaderVersions: []string{"4.2", "4.1"},
		Topics: topics, DefaultPartitions: 1}
	f, err := spec.ClusterFile()
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Leaders {
		f.Leaders[i].Addr = lns[f.Leaders[i].NodeID].Addr().String()
	}
	e, err := node.StartEmbedded(node.EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: lns, AdminListen: "127.0.0.1:0",
		MarkerVersionDiscovery: discovery, MarkerRequestTimeout: 5 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		e.Stop(ctx)
	})
	return testCluster{e: e, bootstrap: lns[0].Addr().String()}
}

// txn runs one kgo transaction of id on orders: end "commit", "abort",
// or "" to leave it open (the client is closed at the test's end).
func (c testCluster) txn(t *testing.T, id, end string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap), kgo.TransactionalID(id), kgo.DefaultProduceTopic("orders"),
		kgo.TransactionTimeout(2*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(id)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", id, err)
		}
	}
	if end == "" {
		return
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(end == "commit")); err != nil {
		t.Fatalf("%s: %s: %v", id, end, err)
	}
}

// waitComplete waits until id's last transaction has its markers written:
// its EndTxn answered once its Prepare was durable, so records produced
// right after it may otherwise land before its markers.
func (c testCluster) waitComplete(t *testing.T, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, _ := c.e.Coordinator.Coordinator.Describe(id)
		if d.State == "CompleteCommit" || d.State == "CompleteAbort" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %q 10 s after its end", id, d.State)
		}
	}
}

// TestBrowserConsole: the transactions view lists a committed, an
// aborted and an open kgo transaction with their states; the topic view
// shows the open one's partitions with their LSO below the HW; the Abort button
// asks first (Cancel leaves the transaction open) and, confirmed, ends
// it; the cluster view shows each leader's negotiated WriteTxnMarkers
// version; the topics, markers and groups views draw; the plots draw
// lines from /metrics while transactions run.
func TestBrowserConsole(t *testing.T) {
	ctx := browser(t)
	c := startCluster(t, true)
	c.txn(t, "console-committed", "commit")
	c.txn(t, "console-aborted", "abort")
	c.txn(t, "console-open", "")
	adm := kadm.NewClient(kgoClient(t, c.bootstrap))
	offsets := kadm.Offsets{}
	offsets.AddOffset("orders", 0, 1, -1)
	if _, err := adm.CommitOffsets(context.Background(), "console-group", offsets); err != nil {
		t.Fatal(err)
	}
	base := c.e.Admin.URL()

	run(t, ctx, "open the console", chromedp.Navigate(base+"/#/transactions"))
	want := map[string]string{"console-committed": "CompleteCommit", "console-aborted": "CompleteAbort", "console-open": "Ongoing"}
	for id, state := range want {
		waitJS(t, ctx, id+" listed as "+state, fmt.Sprintf(`(() => { const b = document.querySelector('tr[data-txn=%q] [data-state]'); return !!b && b.dataset.state === %q })()`, id, state))
	}
	loaded(t, ctx, "transactions")
	screenshot(t, ctx, "transactions")

	t.Run("filter", func(t *testing.T) {
		run(t, ctx, "filter open", chromedp.SetValue(chromedp.CSS("#f-state"), "open"), change("#f-state"))
		waitJS(t, ctx, "only the open transaction", `document.querySelectorAll('#txn-table tr[data-txn]').length === 1 && !!document.querySelector('tr[data-txn="console-open"]')`)
		run(t, ctx, "filter any", chromedp.SetValue(chromedp.CSS("#f-state"), ""), change("#f-state"))
		waitJS(t, ctx, "all three again", `document.querySelectorAll('#txn-table tr[data-txn]').length === 3 && document.querySelector('#txn-pager .where').textContent.startsWith('1–3 of 3')`)
		// The id glob is matched by the server.
		run(t, ctx, "filter by id", chromedp.SetValue(chromedp.CSS("#f-pattern"), "console-a*"), event("#f-pattern", "input"))
		waitJS(t, ctx, "only the aborted one", `document.querySelectorAll('#txn-table tr[data-txn]').length === 1 && !!document.querySelector('tr[data-txn="console-aborted"]')`)
		run(t, ctx, "no id filter", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			// SetValue refuses an empty value: clear it in the page.
			_, err := chromedp.Evaluate[bool](`(() => { const i = document.querySelector('#f-pattern'); i.value = ''; return i.dispatchEvent(new Event('input')) })()`)(ctx, t)
			return err
		}))
		waitJS(t, ctx, "all three once more", `document.querySelectorAll('#txn-table tr[data-txn]').length === 3`)
	})

	t.Run("views", func(t *testing.T) {
		for _, v := range []struct{ name, hash, ready string }{
			{"markers", "#/markers", `document.querySelectorAll('section[data-leader]').length >= 2`},
			{"topics", "#/topics", `[...document.querySelectorAll('main td a')].some(a => a.textContent === 'orders')`},
			// console-open is still open on partitions 0 and 1: their LSO
			// stays below the HW, and the row names it.
			{"topic", "#/topic/orders", `[0, 1].every(p => {
				const tr = document.querySelector('tr[data-partition="' + p + '"]');
				return !!tr && Number(tr.querySelector('.lso').textContent) < Number(tr.querySelector('.hw').textContent) && tr.querySelector('a[href="#/txn/console-open"]')?.textContent === 'console-open' })`},
			{"groups", "#/groups", `[...document.querySelectorAll('main td a')].some(a => a.textContent === 'console-group')`},
			{"group", "#/group/console-group", `[...document.querySelectorAll('main td')].some(td => td.textContent === 'orders')`},
		} {
			run(t, ctx, v.name, chromedp.Navigate(base+"/"+v.hash))
			waitJS(t, ctx, v.name+" drawn", v.ready)
			loaded(t, ctx, v.name)
			screenshot(t, ctx, v.name)
		}
	})

	t.Run("timeline", func(t *testing.T) {
		// The committed transaction's steps in order; its markers went
		// to leader 1 (Kafka 4.2) with v2 and to leader 2 (4.1) with v1,
		// and both answered NONE.
		run(t, ctx, "open the committed transaction", chromedp.Navigate(base+"/#/txn/console-committed"))
		waitJS(t, ctx, "timeline in order", `(() => {
			const steps = [...document.querySelectorAll('#timeline tr[data-event]')].map(tr => tr.dataset.event);
			const at = (e) => steps.indexOf(e);
			return ['InitProducerId', 'PartitionAdded', 'Prepare', 'MarkerSent', 'MarkerAnswered', 'Complete'].every((e, i, all) => at(e) >= 0 && (i === 0 || at(all[i - 1]) < at(e)))
				&& steps.filter(e => e === 'PartitionAdded').length === 2 })()`)
		waitJS(t, ctx, "each leader's version and answer", `(() => {
			const rows = [...document.querySelectorAll('#timeline tr[data-event]')].map(tr => tr.dataset.event + ' ' + tr.lastChild.textContent);
			return rows.some(r => r.startsWith('MarkerSent COMMIT marker') && r.includes('to leader 1, WriteTxnMarkers v2'))
				&& rows.some(r => r.startsWith('MarkerSent COMMIT marker') && r.includes('to leader 2, WriteTxnMarkers v1'))
				&& rows.filter(r => r.startsWith('MarkerAnswered') && r.endsWith(': NONE')).length === 2 })()`)
		screenshot(t, ctx, "timeline")
	})

	t.Run("abort", func(t *testing.T) {
		run(t, ctx, "open the transaction", chromedp.Navigate(base+"/#/txn/console-open"))
		waitJS(t, ctx, "partitions with their leaders", `document.querySelectorAll('#txn-partitions tr[data-partition]').length === 2`)
		screenshot(t, ctx, "transaction")
		run(t, ctx, "ask to abort", click("#abort"))
		waitJS(t, ctx, "confirm step", `!!document.querySelector('#confirm') && document.querySelector('#confirm').textContent.includes('This will ABORT transaction "console-open"')`)
		screenshot(t, ctx, "abort-confirm")
		run(t, ctx, "cancel", click("#cancel"))
		waitJS(t, ctx, "confirm gone", `!document.querySelector('#confirm') && !!document.querySelector('#abort')`)
		if got := state(t, c, "console-open"); got != "Ongoing" {
			t.Fatalf("after Cancel the transaction is %s, want Ongoing", got)
		}
		run(t, ctx, "ask again", click("#abort"))
		run(t, ctx, "confirm", click("#confirm-abort"))
		waitJS(t, ctx, "aborted", `(() => { const b = document.querySelector('h1 [data-state]'); return !!b && b.dataset.state === 'CompleteAbort' })()`)
		waitJS(t, ctx, "the answer shown", `(document.getElementById('action-result')?.textContent || '').startsWith('Abort accepted')`)
		if got := state(t, c, "console-open"); got != "CompleteAbort" {
			t.Fatalf("admin API after the console's abort: %s, want CompleteAbort", got)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		run(t, ctx, "cluster view", chromedp.Navigate(base+"/#/cluster"))
		// Leader 1 is Kafka 4.2 (WriteTxnMarkers v2), leader 2 4.1 (v1):
		// both received markers above, so both negotiated.
		waitJS(t, ctx, "negotiated versions", `document.querySelector('tr[data-leader="1"] td.wtm')?.textContent === 'v2' && document.querySelector('tr[data-leader="2"] td.wtm')?.textContent === 'v1'`)
		loaded(t, ctx, "cluster")
		screenshot(t, ctx, "cluster")
	})

	t.Run("plots", func(t *testing.T) {
		run(t, ctx, "plots view", chromedp.Navigate(base+"/#/plots"))
		// Transactions while the page samples /metrics: the rate and the
		// latency lines need EndTxn calls between two samples.
		done := make(chan struct{})
		go func() {
			defer close(done)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap), kgo.TransactionalID("console-plot"), kgo.DefaultProduceTopic("orders"))
			if err != nil {
				return
			}
			defer cl.Close()
			for i := 0; i < 40; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if cl.BeginTransaction() == nil && cl.ProduceSync(ctx, &kgo.Record{Value: []byte("p")}).FirstErr() == nil {
					cl.EndTransaction(ctx, kgo.TryCommit)
				}
				cancel()
				time.Sleep(100 * time.Millisecond)
			}
		}()
		waitJS(t, ctx, "plot lines", `['plot-txns', 'plot-latency', 'plot-markers'].every(id => {
			const l = document.querySelector('#' + id + ' polyline.series');
			return !!l && l.getAttribute('points').split(' ').length >= 2 })`)
		<-done
		// A few more samples (the last ones at rest) before the picture.
		waitJS(t, ctx, "more samples", `document.querySelector('#plot-txns polyline.series').getAttribute('points').split(' ').length >= 5`)
		screenshot(t, ctx, "plots")
	})
}

// TestBrowserStuckMarker: in the reproduction mode (no marker version
// discovery), a committed transaction's v2 marker to the 4.1 leader gets
// stuck; its page shows why, with the Retry button (confirmed, the API
// accepts the retry), and the markers view
// lists it as STUCK under that leader with the reason.
func TestBrowserStuckMarker(t *testing.T) {
	ctx := browser(t)
	c := startCluster(t, false)
	c.txn(t, "console-stuck", "commit")
	base := c.e.Admin.URL()
	run(t, ctx, "open the transaction", chromedp.Navigate(base+"/#/txn/console-stuck"))
	waitJS(t, ctx, "stuck reason", `(document.getElementById('stuck-reason')?.textContent || '').includes('advertises max v1')`)
	waitJS(t, ctx, "retry button", `!!document.getElementById('retry')`)
	// The timeline says what happened: v2 to the 4.1 leader, no answer.
	waitJS(t, ctx, "v2 to leader 2 without an answer", `(() => {
		const rows = [...document.querySelectorAll('#timeline tr[data-event]')].map(tr => tr.dataset.event + ' ' + tr.lastChild.textContent);
		return rows.some(r => r.startsWith('MarkerSent') && r.includes('to leader 2, WriteTxnMarkers v2'))
			&& rows.some(r => r.startsWith('MarkerAnswered') && r.includes('leader 2 answered') && r.endsWith('NO_ANSWER')) })()`)
	screenshot(t, ctx, "stuck")
	// Retry resends the markers (they get stuck again: the leader still
	// advertises max v1); the API accepted it.
	run(t, ctx, "ask to retry", click("#retry"))
	waitJS(t, ctx, "retry confirm step", `(document.getElementById('confirm')?.textContent || '').includes('resends the undelivered markers of "console-stuck"')`)
	run(t, ctx, "confirm retry", click("#confirm-retry"))
	waitJS(t, ctx, "retry accepted", `(document.getElementById('action-result')?.textContent || '').startsWith('Retry accepted')`)
	run(t, ctx, "markers view", chromedp.Navigate(base+"/#/markers"))
	waitJS(t, ctx, "stuck under leader 2", `[...document.querySelectorAll('section[data-leader="2"] tbody tr')].some(tr =>
		tr.textContent.includes('console-stuck') && tr.textContent.includes('STUCK') && tr.textContent.includes('advertises max v1'))`)
	screenshot(t, ctx, "markers-stuck")
}

// loaded logs how long the view took to fetch and draw (the page records
// it on main).
func loaded(t *testing.T, ctx context.Context, view string) {
	t.Helper()
	ms := eval[string](t, ctx, `document.getElementById('main').dataset.loadedMs || ''`)
	t.Logf("view %s: fetched and drawn in %s ms", view, ms)
}

// TestBrowserSecureShowsOnlyLogin: with an admin token (what `up
// --secure` configures), the console without a login shows the login form
// and no data; a wrong token is refused; the right one shows the
// transactions.
func TestBrowserSecureShowsOnlyLogin(t *testing.T) {
	ctx := browser(t)
	c := startCluster(t, true)
	c.txn(t, "secret-txn", "commit")
	srv, err := admin.Start("127.0.0.1:0", c.e.Coordinator.AdminBackend(), c.e.Metrics, admin.Auth{Token: "s3cret-token"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })

	run(t, ctx, "open the console", chromedp.Navigate(srv.URL()+"/#/transactions"))
	waitJS(t, ctx, "login form", `!document.getElementById('login').hidden`)
	text := eval[string](t, ctx, `document.getElementById('nav').hidden + '|' + document.getElementById('main').textContent + '|' + document.querySelectorAll('table').length`)
	if text != "true||0" {
		t.Fatalf("before login: nav hidden|main text|tables = %q, want the login only", text)
	}
	body := eval[string](t, ctx, `document.body.innerText`)
	if strings.Contains(body, "secret-txn") {
		t.Fatal("the page shows a transaction before login")
	}
	screenshot(t, ctx, "login")

	run(t, ctx, "wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "wrong"), chromedp.Click(chromedp.CSS("#login button")))
	waitJS(t, ctx, "refused", `document.getElementById('login-error').textContent.includes('refused') && !document.getElementById('login').hidden`)
	run(t, ctx, "right token", chromedp.SendKeys(chromedp.CSS("#token"), "s3cret-token"), chromedp.Click(chromedp.CSS("#login button")))
	waitJS(t, ctx, "transactions after login", `!!document.querySelector('tr[data-txn="secret-txn"]')`)
	href, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(href, "s3cret") {
		t.Fatalf("the token is in the URL: %s", href)
	}
}

// click clicks the button sel, waiting for it, in one step in the page:
// the transaction page is redrawn on every poll, and a click by
// coordinates could land on a node that was just replaced.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](fmt.Sprintf(`(() => { const b = document.querySelector(%q); if (!b) return false; b.click(); return true })()`, sel),
			chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return err
	})
}

// change fires a change event on the element sel, as a user's choice
// does (SetValue sets the value only).
func change(sel string) chromedp.Action[chromedp.Void] { return event(sel, "change") }

// event fires the event name on the element sel.
func event(sel, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).dispatchEvent(new Event(%q))`, sel, name))(ctx, t)
		return err
	})
}

func kgoClient(t *testing.T, bootstrap string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// state is a transaction's state from the admin API.
func state(t *testing.T, c testCluster, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := admin.NewClient(c.e.Admin.URL()).Transaction(ctx, id)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return tx.State
}

// TestBrowserManyTransactions measures, with TXNCOORD_CONSOLE_MANY=N
// (e.g. 10000) kgo transactions committed, how long each view takes to
// fetch and draw; it logs the times and asserts only that the views draw.
func TestBrowserManyTransactions(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TXNCOORD_CONSOLE_MANY"))
	if n <= 0 {
		t.Skip("a measurement: set TXNCOORD_CONSOLE_MANY=10000 (and TXNCOORD_BROWSER_TESTS=1) to run it")
	}
	ctx := browser(t)
	c := startClusterWith(t, true, map[string]int32{"orders": 3, "wide": 1000})
	started := time.Now()
	var wg sync.WaitGroup
	ids := make(chan int)
	var failed atomic.Int64
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				if err := commitOne(c.bootstrap, fmt.Sprintf("many-%05d", i), int32(i%3)); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d transactions failed", f, n)
	}
	t.Logf("%d transactions committed in %s", n, time.Since(started).Round(time.Millisecond))
	base := c.e.Admin.URL()
	for _, v := range []struct{ name, hash, ready string }{
		{"transactions", "#/transactions", `document.querySelectorAll('#txn-table tr[data-txn]').length === 50 && document.querySelector('#txn-pager .where').textContent.startsWith('1–50 of ' + ` + strconv.Itoa(n) + `)`},
		{"transaction", "#/txn/many-00042", `document.querySelectorAll('h1 [data-state]').length === 1`},
		{"cluster", "#/cluster", `!!document.querySelector('tr[data-leader="1"]')`},
		{"markers", "#/markers", `document.querySelectorAll('section[data-leader]').length >= 2`},
		{"topics", "#/topics", `[...document.querySelectorAll('main td a')].some(a => a.textContent === 'orders')`},
		{"topic", "#/topic/orders", `document.querySelectorAll('main tbody tr[data-partition]').length === 3`},
		// 1,000 partitions, a page of 100 at a time.
		{"topic of 1000 partitions", "#/topic/wide", `document.querySelectorAll('main tbody tr[data-partition]').length === 100 && document.querySelector('#partition-pager .where').textContent.startsWith('1–100 of 1000')`},
		{"records", "#/records/orders/0", `document.querySelectorAll('#records-table tr[data-offset]').length === 50`},
		{"groups", "#/groups", `!!document.querySelector('main table')`},
		{"faults", "#/faults", `!!document.querySelector('#faults-table tbody tr')`},
	} {
		run(t, ctx, "blank", chromedp.Navigate("about:blank"))
		start := time.Now()
		run(t, ctx, v.name, chromedp.Navigate(base+"/"+v.hash))
		waitJS(t, ctx, v.name+" drawn", v.ready)
		t.Logf("view %s with %d transactions: %s from navigation to drawn (fetch and draw: %s ms)", v.name, n,
			time.Since(start).Round(time.Millisecond), eval[string](t, ctx, `document.getElementById('main').dataset.loadedMs || ''`))
	}
	// The next page of each paged view, fetched from the server.
	for _, p := range []struct{ name, hash, pager, ready, next string }{
		{"transactions", "#/transactions", "#txn-pager", "1–50 of", "51–100 of"},
		{"topic of 1000 partitions", "#/topic/wide", "#partition-pager", "1–100 of", "101–200 of"},
	} {
		where := `document.querySelector('` + p.pager + ` .where')?.textContent.startsWith('%s')`
		run(t, ctx, p.name, chromedp.Navigate(base+"/"+p.hash))
		waitJS(t, ctx, p.name+" first page", fmt.Sprintf(where, p.ready))
		start := time.Now()
		run(t, ctx, p.name+" next page", click(p.pager+" .next"))
		waitJS(t, ctx, p.name+" second page", fmt.Sprintf(where, p.next))
		t.Logf("view %s, next page: %s from the click to drawn", p.name, time.Since(start).Round(time.Millisecond))
	}
}

// commitOne commits one transaction of id with one record on partition p.
func commitOne(bootstrap, id string, p int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.TransactionalID(id), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(id)}).FirstErr(); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}
