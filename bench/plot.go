package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// targetColors keeps one colour per target across the three panels.
var targetColors = map[string]color.Color{
	TargetTxncoord:       color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	TargetTxncoordNoSync: color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	TargetKfake:          color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	TargetKfakeSync:      color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	TargetTxncoordEtcd3:  color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// minPlotMs keeps a log axis defined when a latency rounds to zero.
const minPlotMs = 0.001

// WritePlot draws commit latency p50 / p99 / p99.9 (one panel each, log
// milliseconds) against producer count, one line per target, as a PNG.
func (r *Report) WritePlot(path string) error {
	pick := []struct {
		title string
		get   func(Latencies) time.Duration
	}{
		{"commit latency p50", func(l Latencies) time.Duration { return l.P50 }},
		{"commit latency p99", func(l Latencies) time.Duration { return l.P99 }},
		{"commit latency p99.9", func(l Latencies) time.Duration { return l.P999 }},
	}
	labels := make([]string, len(r.Producers))
	for i, n := range r.Producers {
		labels[i] = fmt.Sprint(n)
	}
	var panels []*plot.Plot
	for _, pk := range pick {
		lo, hi := math.Inf(1), math.Inf(-1)
		p := plot.New()
		p.Title.Text = pk.title
		p.X.Label.Text = "producers"
		p.Y.Label.Text = "ms (log)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.NominalX(labels...)
		p.Legend.Top = true
		p.Legend.Left = true
		for _, target := range r.Targets {
			var pts plotter.XYs
			for i, n := range r.Producers {
				if row, ok := r.Row(target, n); ok {
					v := float64(pk.get(row.Commit)) / float64(time.Millisecond)
					v = max(v, minPlotMs)
					lo, hi = min(lo, v), max(hi, v)
					pts = append(pts, plotter.XY{X: float64(i), Y: v})
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			c, ok := targetColors[target]
			if !ok {
				c = color.Black
			}
			line.Color, points.Color = c, c
			p.Add(line, points)
			p.Legend.Add(target, line, points)
		}
		// Whole decades on a log axis, so LogTicks labels at least two, and
		// half a slot either side of the first and last producer count.
		if lo <= hi {
			p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)+1e-9))
		}
		p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
		panels = append(panels, p)
	}

	width, height := vg.Points(float64(400*len(panels))), vg.Points(360)
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
