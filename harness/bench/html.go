package bench

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	rateColor  = color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	errorColor = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	p50Color   = color.NRGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	p99Color   = color.NRGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	maxColor   = color.NRGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	// killFill shades a kill window: from the kill to the next ack.
	killFill = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0x40}
)

// killBands draws each kill window as a shaded band over the plot's height.
type killBands []KillWindow

func (b killBands) Plot(c draw.Canvas, p *plot.Plot) {
	for _, k := range b {
		x0, x1 := c.X(p.X.Norm(k.At)), c.X(p.X.Norm(k.Recovered))
		if x1-x0 < 1 {
			x1 = x0 + 1 // a very short window stays visible
		}
		c.FillPolygon(killFill, c.ClipPolygonXY([]vg.Point{
			{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y},
		}))
	}
}

// WriteHTML writes a self-contained HTML report of a run: its summary,
// throughput and errors per step, latency per step (p50, p99 and max, on a
// log scale) and, for a failover run, each kill as a shaded band from the
// kill to the next acknowledged send, with a table of them.
func WriteHTML(w io.Writer, title, summary, latencyOf string, series []Interval, kills []KillWindow) error {
	end := 0.0
	if n := len(series); n > 0 {
		end = series[n-1].Start + 2*(series[n-1].Start-series[max(n-2, 0)].Start)
	}
	for _, k := range kills {
		end = max(end, k.Recovered)
	}
	rate, errs := line{name: "msgs/s", c: rateColor}, line{name: "failed " + latencyOf + "s per step", c: errorColor}
	p50, p99, pmax := line{name: "p50", c: p50Color}, line{name: "p99", c: p99Color}, line{name: "max", c: maxColor}
	anyErr := false
	for _, s := range series {
		anyErr = anyErr || s.Errors > 0
	}
	for i, s := range series {
		rate.add(s.Start, s.Rate, false)
		if anyErr {
			errs.add(s.Start, float64(s.Errors), false)
		}
		// A step without answers breaks the latency lines rather than
		// joining its neighbours across the gap.
		gap := i > 0 && series[i-1].P50 == 0
		if s.P50 > 0 {
			p50.add(s.Start, s.P50, gap)
			p99.add(s.Start, s.P99, gap)
			pmax.add(s.Start, s.Max, gap)
		}
	}
	tput, err := chart("Throughput", "messages per second", end, kills, false, rate, errs)
	if err != nil {
		return err
	}
	// A run without latency samples (push consumers: their pulls are the
	// client's own) gets a note instead of an empty log-scale chart.
	lat := "<p>No latency recorded for this run.</p>"
	if len(p50.segs) > 0 {
		if lat, err = chart("Latency of each "+latencyOf, "milliseconds (log scale)", end, kills, true, pmax, p99, p50); err != nil {
			return err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n", html.EscapeString(title))
	b.WriteString("<style>body{font-family:sans-serif;margin:2em;max-width:60em}td,th{padding:0 1em;text-align:right}" +
		".band{background:rgba(214,39,40,0.25);padding:0 .4em}</style></head><body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p>%s</p>\n", html.EscapeString(title), html.EscapeString(summary))
	if len(series) > 1 {
		fmt.Fprintf(&b, "<p>One point per %.1f s step.", series[1].Start-series[0].Start)
		if len(kills) > 0 {
			b.WriteString(` <span class="band">Shaded</span>: from a kill -9 of the leader to the next acknowledged send.`)
		}
		b.WriteString("</p>\n")
	}
	b.WriteString(tput + "\n" + lat + "\n")
	if len(kills) > 0 {
		b.WriteString("<h2>Kills</h2>\n<table><tr><th>#</th><th>node</th><th>killed at (s)</th><th>acknowledging again after (ms)</th></tr>\n")
		for i, k := range kills {
			fmt.Fprintf(&b, "<tr><td>%d</td><td>n%d</td><td>%.2f</td><td>%.0f</td></tr>\n", i+1, k.Node, k.At, (k.Recovered-k.At)*1000)
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body></html>\n")
	_, err = io.WriteString(w, b.String())
	return err
}

// ticks125 marks a log axis at 1, 2 and 5 times each power of ten.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= lo && v <= hi {
				t = append(t, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	return t
}

// line is one named series, drawn as segments.
type line struct {
	name string
	segs []plotter.XYs
	c    color.NRGBA
}

// add appends a point, starting a new segment if brk is set.
func (l *line) add(x, y float64, brk bool) {
	if brk || len(l.segs) == 0 {
		l.segs = append(l.segs, nil)
	}
	l.segs[len(l.segs)-1] = append(l.segs[len(l.segs)-1], plotter.XY{X: x, Y: y})
}

// chart renders lines over [0, end] seconds as an inline SVG element.
func chart(title, ylabel string, end float64, kills []KillWindow, logY bool, lines ...line) (string, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds since the start"
	p.Y.Label.Text = ylabel
	p.X.Min, p.X.Max = 0, max(end, 1)
	p.Legend.Top = true
	top, low := 0.0, math.Inf(1)
	for _, l := range lines {
		for _, seg := range l.segs {
			for _, xy := range seg {
				top = max(top, xy.Y)
				if xy.Y > 0 {
					low = min(low, xy.Y)
				}
			}
		}
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = ticks125{}
		if top > 0 {
			p.Y.Min, p.Y.Max = low/1.5, top*3 // room for the legend
		}
	} else {
		p.Y.Min, p.Y.Max = 0, max(top*1.25, 1)
	}
	p.Add(plotter.NewGrid())
	if len(kills) > 0 {
		p.Add(killBands(kills))
	}
	for _, l := range lines {
		for i, seg := range l.segs {
			ln, err := plotter.NewLine(seg)
			if err != nil {
				return "", fmt.Errorf("bench: report: %s: %w", l.name, err)
			}
			ln.Color = l.c
			p.Add(ln)
			if i == 0 {
				p.Legend.Add(l.name, ln)
			}
		}
	}
	wt, err := p.WriterTo(9*vg.Inch, 3.2*vg.Inch, "svg")
	if err != nil {
		return "", fmt.Errorf("bench: report: %w", err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("bench: report: %w", err)
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:] // drop the XML prolog: the SVG is inlined in HTML
	}
	return svg, nil
}
