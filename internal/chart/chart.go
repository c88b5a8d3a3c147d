// Package chart draws the line charts of raftmq's HTML pages: series of
// points over a time axis in seconds, as an SVG element to inline in a
// page (no script, nothing fetched), with optional shaded windows and a
// logarithmic value axis. The web console's rate and lag plots and the
// benchmark's reports draw with it; the chaos reports take its colours.
package chart

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The colours of every chart, in the order Palette hands them out.
var (
	Blue   = color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	Orange = color.NRGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	Green  = color.NRGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	Red    = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	Purple = color.NRGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	Brown  = color.NRGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}
	Pink   = color.NRGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}
	Grey   = color.NRGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
	Cyan   = color.NRGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}
)

// windowFill shades a Window: translucent red.
var windowFill = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0x40}

// Palette returns the i-th colour of the series palette (it repeats past
// its end).
func Palette(i int) color.NRGBA {
	p := [...]color.NRGBA{Blue, Orange, Green, Red, Purple, Brown, Pink, Grey}
	return p[((i%len(p))+len(p))%len(p)]
}

// Line is one named series drawn in one colour, as segments: a gap in the
// data starts a new segment instead of joining its neighbours.
type Line struct {
	Name  string
	Color color.NRGBA
	segs  []plotter.XYs
}

// Add appends the point (x, y); brk starts a new segment with it.
func (l *Line) Add(x, y float64, brk bool) {
	if brk || len(l.segs) == 0 {
		l.segs = append(l.segs, nil)
	}
	l.segs[len(l.segs)-1] = append(l.segs[len(l.segs)-1], plotter.XY{X: x, Y: y})
}

// Empty reports whether the line has no point.
func (l *Line) Empty() bool { return len(l.segs) == 0 }

// Window is a span of the time axis shaded over the chart's height (a
// kill and its recovery, say), in seconds.
type Window struct{ From, To float64 }

// Spec is a chart to draw.
type Spec struct {
	Title  string
	YLabel string
	// End is the end of the time axis in seconds (at least 1); it starts
	// at 0.
	End float64
	// Start, if set, makes the time axis wall-clock time: x is seconds
	// after Start, ticks are labelled with UTC clock times (TimeFormat).
	Start time.Time
	// LogY draws values on a logarithmic axis marked at 1, 2 and 5 times
	// each power of ten; zero and negative values are left out of its range.
	LogY    bool
	Windows []Window
	Lines   []Line
}

// Render draws s as an inline SVG element.
func Render(s Spec) (string, error) {
	p := plot.New()
	p.Title.Text = s.Title
	p.X.Label.Text = "seconds since the start"
	if !s.Start.IsZero() {
		p.X.Label.Text = "time (UTC)"
		start := s.Start
		p.X.Tick.Marker = plot.TimeTicks{Format: TimeFormat, Time: func(x float64) time.Time {
			return start.Add(time.Duration(x * float64(time.Second))).UTC()
		}}
	}
	p.Y.Label.Text = s.YLabel
	p.X.Min, p.X.Max = 0, max(s.End, 1)
	p.Legend.Top = true
	top, low := 0.0, math.Inf(1)
	for _, l := range s.Lines {
		for _, seg := range l.segs {
			for _, xy := range seg {
				top = max(top, xy.Y)
				if xy.Y > 0 {
					low = min(low, xy.Y)
				}
			}
		}
	}
	if s.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = ticks125{}
		if top > 0 {
			p.Y.Min, p.Y.Max = low/1.5, top*3 // room for the legend
		}
	} else {
		p.Y.Min, p.Y.Max = 0, max(top*1.25, 1)
	}
	p.Add(plotter.NewGrid())
	if len(s.Windows) > 0 {
		p.Add(windows(s.Windows))
	}
	for _, l := range s.Lines {
		for i, seg := range l.segs {
			ln, err := plotter.NewLine(seg)
			if err != nil {
				return "", fmt.Errorf("chart %q: line %q: %w", s.Title, l.Name, err)
			}
			ln.Color = l.Color
			p.Add(ln)
			if i == 0 {
				p.Legend.Add(l.Name, ln)
			}
		}
	}
	wt, err := p.WriterTo(9*vg.Inch, 3.2*vg.Inch, "svg")
	if err != nil {
		return "", fmt.Errorf("chart %q: %w", s.Title, err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("chart %q: %w", s.Title, err)
	}
	return Inline(buf.String()), nil
}

// TimeFormat labels a wall-clock axis' ticks (Spec.Start).
const TimeFormat = "15:04:05"

// Inline drops the XML prolog of an SVG document, which an SVG element
// inlined in HTML must not have.
func Inline(doc string) string {
	if i := strings.Index(doc, "<svg"); i > 0 {
		return doc[i:]
	}
	return doc
}

// Series is one named line of points (x in seconds, y any unit) for
// LineChart.
type Series struct {
	Name   string
	Points [][2]float64
}

// LineChart draws series over [0, end] seconds, coloured in palette order;
// a series without points is left out.
func LineChart(title, ylabel string, end float64, series []Series) (string, error) {
	s := Spec{Title: title, YLabel: ylabel, End: end}
	for i, sr := range series {
		l := Line{Name: sr.Name, Color: Palette(i)}
		for _, p := range sr.Points {
			l.Add(p[0], p[1], false)
		}
		if !l.Empty() {
			s.Lines = append(s.Lines, l)
		}
	}
	return Render(s)
}

// windows shades each window over the plot's height.
type windows []Window

func (ws windows) Plot(c draw.Canvas, p *plot.Plot) {
	for _, w := range ws {
		x0, x1 := c.X(p.X.Norm(w.From)), c.X(p.X.Norm(w.To))
		if x1-x0 < 1 {
			x1 = x0 + 1 // a very short window stays visible
		}
		c.FillPolygon(windowFill, c.ClipPolygonXY([]vg.Point{
			{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y},
		}))
	}
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
