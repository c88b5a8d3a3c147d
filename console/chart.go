package console

import (
	"bytes"
	"fmt"
	"image/color"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// series is a line of a time plot: values at wall-clock times.
type series struct {
	name string
	at   []time.Time
	v    []float64
}

var lineColors = []color.NRGBA{{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, {R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, {R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}}

// timeFormat is the x axis' tick label: wall-clock time in UTC, with
// seconds (the plots cover ten minutes at most).
const timeFormat = "15:04:05"

// timePlot renders lines over wall-clock time (UTC, as every time the
// console shows) as an inline SVG element.
func timePlot(title, ylabel string, lines []series) (string, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (UTC)"
	p.Y.Label.Text = ylabel
	p.X.Tick.Marker = plot.TimeTicks{Format: timeFormat, Time: func(t float64) time.Time {
		return time.UnixMilli(int64(t * 1000)).UTC()
	}}
	p.Legend.Top = true
	top := 0.0
	first, last := 0.0, 0.0
	p.Add(plotter.NewGrid())
	for i, s := range lines {
		if len(s.at) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(s.at))
		for j, at := range s.at {
			x := float64(at.UnixMilli()) / 1000
			xys[j] = plotter.XY{X: x, Y: s.v[j]}
			top = max(top, s.v[j])
			if first == 0 || x < first {
				first = x
			}
			last = max(last, x)
		}
		ln, err := plotter.NewLine(xys)
		if err != nil {
			return "", fmt.Errorf("console: plot %q: %w", title, err)
		}
		ln.Color = lineColors[i%len(lineColors)]
		p.Add(ln)
		p.Legend.Add(s.name, ln)
	}
	p.X.Min, p.X.Max = first, max(last, first+1)
	p.Y.Min, p.Y.Max = 0, max(top*1.25, 1)
	wt, err := p.WriterTo(9*vg.Inch, 3.2*vg.Inch, "svg")
	if err != nil {
		return "", fmt.Errorf("console: plot %q: %w", title, err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("console: plot %q: %w", title, err)
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:] // drop the XML prolog: the SVG is inlined in HTML
	}
	return svg, nil
}
