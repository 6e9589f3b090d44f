package bench

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// NewProgress reports the runner's progress on w: a live bar when w is a
// terminal (tty), one plain line per finished cell otherwise (CI logs).
func NewProgress(w io.Writer, tty bool) Progress {
	return &progress{w: w, tty: tty}
}

type progress struct {
	w   io.Writer
	tty bool

	bar  *progressbar.ProgressBar
	stop chan struct{}  // closes the ticker of the running cell
	done sync.WaitGroup // the ticker goroutine
}

// tickEvery is how often the bar shows the running cell's transaction count.
const tickEvery = 250 * time.Millisecond

func (p *progress) CellStart(label string, index, total int, txns *atomic.Int64) {
	p.endTicker()
	if !p.tty {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetWidth(20), progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true))
	}
	p.bar.Describe(label)
	p.stop = make(chan struct{})
	p.done.Add(1)
	go func(stop chan struct{}) {
		defer p.done.Done()
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.bar.Describe(fmt.Sprintf("%s: %d txns", label, txns.Load()))
			}
		}
	}(p.stop)
}

func (p *progress) endTicker() {
	if p.stop != nil {
		close(p.stop)
		p.done.Wait()
		p.stop = nil
	}
}

func (p *progress) CellDone(c Cell) {
	p.endTicker()
	line := cellLine(c)
	if p.tty && p.bar != nil {
		_ = p.bar.Add(1)
		// Print above the bar: clear its line, write, let it redraw.
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
		_ = p.bar.RenderBlank()
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) Close() {
	p.endTicker()
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

// cellLine is the one-line summary of a finished cell.
func cellLine(c Cell) string {
	head := fmt.Sprintf("round %d %s producers=%d:", c.Round+1, c.Target, c.Producers)
	if c.Result == nil {
		return head + " FAILED: " + c.Err
	}
	l := latencies(c.Result, false)
	line := fmt.Sprintf("%s %.0f txn/s, commit p50 %s ms p99 %s ms, server CPU %s ms/1k txn, peak RSS %.1f MiB",
		head, c.Result.TxnPerSec(), ms(l.P50), ms(l.P99), ms(c.CPUPer1000()), float64(c.PeakRSS)/(1<<20))
	if c.HostSteal >= 0.005 {
		line += fmt.Sprintf(", host steal %.0f%%", 100*c.HostSteal)
	}
	line += fmt.Sprintf(", host idle %.0f%%", 100*c.HostIdle)
	if c.Err != "" {
		line += " (error: " + c.Err + ")"
	}
	return line
}
