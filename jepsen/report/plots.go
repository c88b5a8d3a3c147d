package report

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"html"
	"image/color"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/raftmq/raftmq/internal/chart"
	"github.com/raftmq/raftmq/jepsen/history"
)

// Plot geometry and limits.
const (
	plotWidth  = 10 * vg.Inch
	plotHeight = 3.4 * vg.Inch
	// legendGap separates the plot from the legend drawn at its right.
	legendGap = 8 // points
	// maxScatterPoints is the number of points above which the latency
	// scatter is downsampled.
	maxScatterPoints = 20000
	// bandAlpha is the alpha of fault bands. The SVG post-processing finds
	// bands by the fill-opacity it produces, so nothing else in a plot may
	// be filled with this alpha (legend thumbnails use thumbAlpha).
	bandAlpha  = 0x40
	thumbAlpha = 0x80
	// minBandWidth is the narrowest a fault band is drawn, in points, so
	// instantaneous faults stay visible.
	minBandWidth = 1.5
	// nsPerSec converts history times to seconds.
	nsPerSec = 1e9
	// mergeCellsX and mergeCellsY divide the latency plot into cells of
	// about half a point (the data area is some 600 by 200 points) in
	// which overlapping ok sends are merged.
	mergeCellsX = 1400
	mergeCellsY = 450
	// maxQueueSeries is the number of queues above which the offsets plot
	// shows totals instead of one line per queue.
	maxQueueSeries = 6
)

// Colors of operation outcomes and polls, those of every chart of the
// project's pages, and the healed marker's (0xRRGGBB).
var (
	okColor   = chart.Blue
	failColor = chart.Red
	infoColor = chart.Orange
	pollColor = chart.Green
)

const healedRGB = 0x008000

// hexColor returns the opaque color 0xRRGGBB.
func hexColor(v uint32) color.NRGBA {
	return color.NRGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// kindColor returns the (opaque) color of a fault kind. Known kinds have
// fixed colors; others get a color from a small palette chosen by a hash
// of the name, so a kind keeps its color across runs.
func kindColor(kind string) color.NRGBA {
	rgb := func(r, g, b uint8) color.NRGBA { return color.NRGBA{R: r, G: g, B: b, A: 0xff} }
	switch kind {
	case "partition":
		return chart.Purple
	case "kill":
		return rgb(0xe3, 0x4a, 0x33)
	case "pause":
		return chart.Grey
	case "power-loss":
		return rgb(0x8c, 0x2d, 0x04)
	case "corrupt":
		return chart.Pink
	case "clock":
		return chart.Cyan
	case "delay":
		return rgb(0xbc, 0xbd, 0x22)
	case "loss":
		return rgb(0xfd, 0xae, 0x6b)
	case "membership":
		return chart.Brown
	case "restart":
		return rgb(0x6b, 0xae, 0xd6)
	case "heal":
		return rgb(0x74, 0xc4, 0x76)
	}
	h := fnv.New32a()
	h.Write([]byte(kind))
	switch h.Sum32() % 6 {
	case 0:
		return rgb(0x1b, 0x9e, 0x77)
	case 1:
		return rgb(0xd9, 0x5f, 0x02)
	case 2:
		return rgb(0x75, 0x70, 0xb3)
	case 3:
		return rgb(0x66, 0xa6, 0x1e)
	case 4:
		return rgb(0xe6, 0xab, 0x02)
	default:
		return rgb(0xa6, 0x76, 0x1d)
	}
}

// cssColor formats c as a CSS hex color.
func cssColor(c color.NRGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// withAlpha returns c with alpha a.
func withAlpha(c color.NRGBA, a uint8) color.NRGBA { c.A = a; return c }

// band is one fault window on the time axis, in seconds.
type band struct {
	Ev          history.Event
	Kind        string
	Start, End  float64
	Title       string // tooltip
	ActiveAtEnd bool
}

// timeAxis is what every plot shares: the x range and the fault bands.
type timeAxis struct {
	Max    float64 // seconds; the axis runs from 0 to Max
	Bands  []band  // one per fault, by start time
	Healed float64 // seconds; 0 = none
}

// secondsTicks labels a time axis in whole seconds (or minutes' worth of
// seconds) with about ten labelled ticks and unlabelled ones between.
func secondsTicks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if span <= 0 {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	step, minor := 1.0, 5
	for _, s := range []struct {
		step  float64
		minor int
	}{{1, 5}, {2, 4}, {5, 5}, {10, 5}, {15, 3}, {30, 3}, {60, 4}, {120, 4}, {300, 5}, {600, 5}, {1200, 4}, {1800, 3}, {3600, 4}} {
		step, minor = s.step, s.minor
		if span/s.step <= 12 {
			break
		}
	}
	for span/step > 12 { // runs longer than half a day
		step *= 2
	}
	var ticks []plot.Tick
	sub := step / float64(minor)
	for i := math.Ceil(lo / sub); i*sub <= hi; i++ {
		v := i * sub
		t := plot.Tick{Value: v}
		if math.Mod(i, float64(minor)) == 0 {
			t.Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// newTimeAxis derives the shared time axis of a run: its length is the
// run's duration, stretched to cover every op and fault.
func newTimeAxis(run *history.Run) timeAxis {
	maxNs := run.Meta.Duration
	for _, op := range run.Ops {
		maxNs = max(maxNs, op.Invoke, op.Complete)
	}
	for _, ev := range run.Events {
		maxNs = max(maxNs, ev.Start, ev.End)
	}
	maxNs = max(maxNs, run.Meta.Healed)
	ax := timeAxis{Max: float64(maxNs) / nsPerSec}
	if ax.Max <= 0 {
		ax.Max = 1
	}
	for _, ev := range run.Events {
		b := band{Ev: ev, Kind: ev.Kind, Start: float64(ev.Start) / nsPerSec, End: float64(ev.End) / nsPerSec}
		if ev.End == 0 || ev.End < ev.Start {
			b.End, b.ActiveAtEnd = ax.Max, true
		}
		b.Title = bandTitle(ev, b)
		ax.Bands = append(ax.Bands, b)
	}
	// The nemesis log is in order of fault end; show faults by start.
	sort.SliceStable(ax.Bands, func(i, j int) bool { return ax.Bands[i].Start < ax.Bands[j].Start })
	if run.Meta.Healed > 0 {
		ax.Healed = float64(run.Meta.Healed) / nsPerSec
	}
	return ax
}

// bandTitle is the tooltip of a fault band.
func bandTitle(ev history.Event, b band) string {
	var sb strings.Builder
	end := fmt.Sprintf("%.1fs", b.End)
	if b.ActiveAtEnd {
		end = "end (still active)"
	}
	fmt.Fprintf(&sb, "%s %.1fs–%s", ev.Kind, b.Start, end)
	if len(ev.Nodes) > 0 {
		fmt.Fprintf(&sb, " nodes %s", joinInts(ev.Nodes))
	}
	if ev.Description != "" {
		sb.WriteString(": " + ev.Description)
	}
	if ev.Error != "" {
		sb.WriteString(" [error: " + ev.Error + "]")
	}
	return sb.String()
}

// bandPlotter shades fault windows across the whole data area. It has no
// data range, so it does not change the axes.
type bandPlotter struct{ bands []band }

// Plot implements plot.Plotter.
func (bp bandPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, b := range bp.bands {
		x0, x1 := trX(b.Start), trX(b.End)
		if x1-x0 < minBandWidth {
			x1 = x0 + minBandWidth
		}
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1 <= x0 {
			// Outside the axis (cannot happen with newTimeAxis): keep one
			// band per fault anyway, at the nearest edge.
			x0 = min(max(x0, c.Min.X), c.Max.X-minBandWidth)
			x1 = x0 + minBandWidth
		}
		c.SetColor(withAlpha(kindColor(b.Kind), bandAlpha))
		c.Fill(rectPath(x0, c.Min.Y, x1, c.Max.Y))
	}
}

// bandThumb is the legend thumbnail of a fault kind.
type bandThumb struct{ kind string }

// Thumbnail implements plot.Thumbnailer.
func (t bandThumb) Thumbnail(c *draw.Canvas) {
	c.SetColor(withAlpha(kindColor(t.kind), thumbAlpha))
	c.Fill(rectPath(c.Min.X, c.Min.Y, c.Max.X, c.Max.Y))
}

// rectPath is the closed path of a rectangle.
func rectPath(x0, y0, x1, y1 vg.Length) vg.Path {
	var p vg.Path
	p.Move(vg.Point{X: x0, Y: y0})
	p.Line(vg.Point{X: x1, Y: y0})
	p.Line(vg.Point{X: x1, Y: y1})
	p.Line(vg.Point{X: x0, Y: y1})
	p.Close()
	return p
}

// healedStyle is the style of the vertical line at Meta.Healed.
func healedStyle() draw.LineStyle {
	return draw.LineStyle{
		Color:  hexColor(healedRGB),
		Width:  vg.Points(1.5),
		Dashes: []vg.Length{vg.Points(5), vg.Points(3)},
	}
}

// healedLine marks when the last fault was healed.
type healedLine struct{ at float64 }

// Plot implements plot.Plotter.
func (h healedLine) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(h.at)
	if x < c.Min.X || x > c.Max.X {
		return
	}
	c.StrokeLine2(healedStyle(), x, c.Min.Y, x, c.Max.Y)
}

// Thumbnail implements plot.Thumbnailer.
func (h healedLine) Thumbnail(c *draw.Canvas) {
	x := (c.Min.X + c.Max.X) / 2
	c.StrokeLine2(healedStyle(), x, c.Min.Y, x, c.Max.Y)
}

// figure is a plot under construction with its legend, drawn at the right
// of the plot rather than over the data.
type figure struct {
	p      *plot.Plot
	legend plot.Legend
	ax     timeAxis
}

// sansFont is the font of all plot text (Liberation Sans is metrically
// compatible with Arial/Helvetica, which the page's CSS falls back to).
func sansFont(size vg.Length) font.Font {
	return font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size)
}

// newFigure starts a plot over the run's time axis with the fault bands
// drawn first (under the data).
func newFigure(title, ylabel string, ax timeAxis) *figure {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sansFont(12)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sansFont(10)
		a.Tick.Label.Font = sansFont(9)
	}
	p.X.Label.Text = "seconds since start"
	p.X.Tick.Marker = plot.TickerFunc(secondsTicks)
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	ch := &figure{p: p, legend: plot.NewLegend(), ax: ax}
	ch.legend.TextStyle.Font = sansFont(9)
	ch.legend.Top, ch.legend.Left = true, true
	ch.legend.ThumbnailWidth = vg.Points(14)
	ch.legend.Padding = vg.Points(2)
	if len(ax.Bands) > 0 {
		p.Add(bandPlotter{bands: ax.Bands})
	}
	return ch
}

// finish adds the legend entries shared by every plot (fault kinds, the
// healed line), fixes the x axis and renders the plot as inline SVG.
func (ch *figure) finish() (string, error) {
	var kinds []string
	seen := map[string]bool{}
	for _, b := range ch.ax.Bands {
		if !seen[b.Kind] {
			seen[b.Kind] = true
			kinds = append(kinds, b.Kind)
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		ch.legend.Add(k, bandThumb{kind: k})
	}
	if ch.ax.Healed > 0 {
		h := healedLine{at: ch.ax.Healed}
		ch.p.Add(h)
		ch.legend.Add("healed", h)
	}
	ch.p.X.Min, ch.p.X.Max = 0, ch.ax.Max
	return renderSVG(ch.p, &ch.legend, ch.ax.Bands)
}

// renderSVG draws p with the legend at its right into an SVG canvas and
// returns the SVG made fit for inlining in HTML.
func renderSVG(p *plot.Plot, legend *plot.Legend, bands []band) (s string, err error) {
	// gonum/plot panics on some degenerate input; report it as an error
	// rather than losing the whole report.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("report: plot %q: %v", p.Title.Text, r)
		}
	}()
	cv := vgsvg.New(plotWidth, plotHeight)
	dc := draw.New(cv)
	var lw vg.Length
	if r := legend.Rectangle(dc); r.Max.X > r.Min.X {
		// Leave slack for viewers that substitute a wider font.
		lw = (r.Max.X-r.Min.X)*1.15 + legendGap
	}
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	if lw > 0 {
		top := vg.Length(0)
		if p.Title.Text != "" {
			top = -(p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding)
		}
		legend.Draw(draw.Crop(dc, plotWidth-lw+legendGap, 0, 0, top))
	}
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("report: render svg: %w", err)
	}
	return inlineSVG(buf.String(), p.Title.Text, bands), nil
}

// Patterns of the SVG vgsvg writes (compiled per plot: cheap next to
// drawing it, and no package state).
const (
	// svgOpenPattern matches the opening tag, with its fixed size.
	svgOpenPattern = `<svg width="[^"]*" height="[^"]*"`
	// bandPathPattern matches the path of a fault band: a fill whose
	// opacity (appended) is that of bandAlpha.
	bandPathPattern = `<path d="[^"]*" style="fill:#[0-9A-Fa-f]{6};fill-opacity:`
	// fillPathPattern matches a line with a plain fill (no stroke, no
	// class: fault bands have been given theirs already).
	fillPathPattern = `^<path d="([^"]*)" (style="fill:#[0-9A-Fa-f]{6}(?:;fill-opacity:[0-9.e-]+)?") */>$`
)

// alphaString is how vgsvg writes the opacity of an 8-bit alpha.
func alphaString(a uint8) string {
	return fmt.Sprintf("%.5g", float64(uint32(a)*0x101)/math.MaxUint16)
}

// inlineSVG turns a standalone SVG document into an element for an HTML
// page: the XML prolog goes, the fixed size gives way to CSS (the viewBox
// keeps the aspect ratio), and every fault band gets a class and a
// tooltip. Bands are matched in drawing order, which is the order of bands.
func inlineSVG(doc, title string, bands []band) string {
	if i := strings.Index(doc, "<svg"); i >= 0 {
		doc = doc[i:]
	}
	svgOpen := regexp.MustCompile(svgOpenPattern)
	bandPath := regexp.MustCompile(bandPathPattern + regexp.QuoteMeta(alphaString(bandAlpha)) + `"\s*/>`)
	doc = svgOpen.ReplaceAllLiteralString(doc,
		`<svg class="plot" role="img" aria-label="`+html.EscapeString(title)+`"`)
	n := 0
	doc = bandPath.ReplaceAllStringFunc(doc, func(m string) string {
		kind, tip := "unknown", ""
		if n < len(bands) {
			kind, tip = bands[n].Kind, bands[n].Title
		}
		n++
		m = strings.TrimRight(strings.TrimSuffix(m, "/>"), " \t\n")
		return `<path class="fault-band fault-` + slug(kind) + `"` + strings.TrimPrefix(m, "<path") +
			`><title>` + html.EscapeString(tip) + `</title></path>`
	})
	return mergeFills(doc)
}

// mergeFills joins runs of consecutive fill paths of the same style into
// one path: a scatter's glyphs become a few elements instead of thousands,
// which shrinks the SVG by a third. (Overlapping translucent glyphs of one
// run then no longer darken each other.)
func mergeFills(doc string) string {
	fillPath := regexp.MustCompile(fillPathPattern)
	lines := strings.Split(doc, "\n")
	out := make([]string, 0, len(lines))
	var d strings.Builder
	style := ""
	flush := func() {
		if style != "" {
			out = append(out, `<path d="`+d.String()+`" `+style+` />`)
			d.Reset()
			style = ""
		}
	}
	for _, l := range lines {
		m := fillPath.FindStringSubmatch(l)
		if m == nil {
			flush()
			out = append(out, l)
			continue
		}
		if m[2] != style {
			flush()
			style = m[2]
		}
		d.WriteString(m[1])
	}
	flush()
	return strings.Join(out, "\n")
}

// slug makes s usable in a CSS class name.
func slug(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "unknown"
	}
	return string(b)
}

// latPoint is one send on the latency plot.
type latPoint struct {
	x, y    float64 // seconds, milliseconds
	outcome history.Outcome
}

// sendPoints collects the sends of a run for the latency scatter, ordered
// by invocation: x is the invoke time, y the latency. Info sends are given
// y = 0 here; the plot puts them at the top.
func sendPoints(ops []history.Op) []latPoint {
	var sends []history.Op
	for _, op := range ops {
		if op.Kind == history.Send {
			sends = append(sends, op)
		}
	}
	sort.SliceStable(sends, func(i, j int) bool {
		if sends[i].Invoke != sends[j].Invoke {
			return sends[i].Invoke < sends[j].Invoke
		}
		return sends[i].ID < sends[j].ID
	})
	pts := make([]latPoint, 0, len(sends))
	for _, op := range sends {
		pt := latPoint{x: float64(op.Invoke) / nsPerSec, outcome: op.Outcome}
		if op.Outcome != history.Info {
			if op.Complete < op.Invoke {
				continue // never completed: no latency to show
			}
			// Clamp to 1 µs: the y axis is logarithmic.
			pt.y = max(float64(op.Complete-op.Invoke)/1e6, 1e-3)
		}
		pts = append(pts, pt)
	}
	return pts
}

// mergeOverlaps drops every ok point that falls in the same cell (xCell
// seconds by yCell decades of latency) as an ok point before it. With
// cells a fraction of a glyph wide this changes nothing visible but can
// shrink the SVG a lot. Fail and info points are all kept.
func mergeOverlaps(pts []latPoint, xCell, yCell float64) []latPoint {
	if !(xCell > 0) || !(yCell > 0) {
		return pts
	}
	type cell struct{ x, y int64 }
	seen := make(map[cell]bool)
	out := make([]latPoint, 0, len(pts))
	for _, p := range pts {
		if p.outcome == history.OK {
			c := cell{int64(math.Floor(p.x / xCell)), int64(math.Floor(math.Log10(p.y) / yCell))}
			if seen[c] {
				continue
			}
			seen[c] = true
		}
		out = append(out, p)
	}
	return out
}

// thin downsamples pts to about limit points, deterministically: every
// fail and info point is kept, and ok points are sampled at an even stride
// (at least a tenth of limit of them survive however many failures there
// are). It returns pts itself when there are at most limit points.
func thin(pts []latPoint, limit int) (out []latPoint, sampled bool) {
	if len(pts) <= limit {
		return pts, false
	}
	nOK := 0
	for _, p := range pts {
		if p.outcome == history.OK {
			nOK++
		}
	}
	budget := max(limit-(len(pts)-nOK), limit/10)
	if nOK <= budget {
		return pts, false
	}
	out = make([]latPoint, 0, len(pts)-nOK+budget)
	next, kept, i := 0, 0, 0 // next: index among ok points of the next one to keep
	for _, p := range pts {
		if p.outcome != history.OK {
			out = append(out, p)
			continue
		}
		if i == next && kept < budget {
			out = append(out, p)
			kept++
			next = kept * nOK / budget
		}
		i++
	}
	return out, true
}

// plotResult is one rendered plot for the report.
type plotResult struct {
	ID      string
	Title   string
	SVG     string
	Caption string
	Err     string
}

// latencyPlot is the send latency scatter (log scale) colored by outcome.
func latencyPlot(run *history.Run, ax timeAxis) plotResult {
	res := plotResult{ID: "plot-latency", Title: "Send latency"}
	all := sendPoints(run.Ops)
	if len(all) == 0 {
		res.Caption = "No sends in this history."
		return res
	}
	lo, hi := math.Inf(1), 0.0
	total := map[history.Outcome]int{}
	for _, p := range all {
		total[p.outcome]++
		if p.outcome != history.Info {
			lo, hi = min(lo, p.y), max(hi, p.y)
		}
	}
	if math.IsInf(lo, 1) { // only info sends
		lo, hi = 1, 1
	}
	top := hi * 2 // where info sends are drawn
	ymin, ymax := lo/1.5, top*1.5
	merged := mergeOverlaps(all, ax.Max/mergeCellsX, math.Log10(ymax/ymin)/mergeCellsY)
	pts, sampled := thin(merged, maxScatterPoints)
	series := map[history.Outcome]plotter.XYs{}
	for _, p := range pts {
		y := p.y
		if p.outcome == history.Info {
			y = top
		}
		series[p.outcome] = append(series[p.outcome], plotter.XY{X: p.x, Y: y})
	}
	ch := newFigure(res.Title, "latency (ms, log)", ax)
	ch.p.Y.Scale = plot.LogScale{}
	ch.p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for _, o := range []struct {
		outcome history.Outcome
		color   color.NRGBA
		radius  float64
		label   string
	}{
		{history.OK, withAlpha(okColor, 0xb0), 1.2, "ok"},
		{history.Fail, failColor, 1.6, "fail"},
		{history.Info, infoColor, 1.6, "info (at top)"},
	} {
		xys := series[o.outcome]
		if len(xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			res.Err = err.Error()
			return res
		}
		s.GlyphStyle = draw.GlyphStyle{Color: o.color, Radius: vg.Points(o.radius), Shape: draw.CircleGlyph{}}
		ch.p.Add(s)
		ch.legend.Add(fmt.Sprintf("%s (%d)", o.label, total[o.outcome]), s)
	}
	ch.p.Y.Min, ch.p.Y.Max = ymin, ymax
	svg, err := ch.finish()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.SVG = svg
	res.Caption = "Each dot is one send at its invocation time; indeterminate (info) sends are drawn at the top."
	if len(pts) < len(all) {
		res.Caption += fmt.Sprintf(" %d of %d sends drawn: every fail and info send; ok sends that would overlap one already drawn are merged", len(pts), len(all))
		if sampled {
			res.Caption += ", and the rest downsampled evenly"
		}
		res.Caption += "."
	}
	return res
}

// buckets counts ops per 1 s bucket of completion time (invocation time
// for ops that never completed).
type buckets struct {
	n                     int
	sendOK, pollOK, other []float64
}

// countBuckets fills the throughput buckets of a run.
func countBuckets(ops []history.Op, ax timeAxis) (b buckets, sends, polls bool) {
	b.n = max(1, int(math.Ceil(ax.Max)))
	b.sendOK = make([]float64, b.n)
	b.pollOK = make([]float64, b.n)
	b.other = make([]float64, b.n)
	for _, op := range ops {
		at := op.Complete
		if at < op.Invoke {
			at = op.Invoke
		}
		i := min(max(int(at/int64(nsPerSec)), 0), b.n-1)
		switch {
		case op.Outcome != history.OK:
			b.other[i]++
		case op.Kind == history.Send:
			b.sendOK[i]++
		case op.Kind == history.Poll:
			b.pollOK[i]++
		}
		sends = sends || op.Kind == history.Send
		polls = polls || op.Kind == history.Poll
	}
	return b, sends, polls
}

// stepLine is a post-step line through per-second values, closed at the
// end of the last bucket.
func stepLine(vals []float64, c color.NRGBA, dashed bool) (*plotter.Line, error) {
	xys := make(plotter.XYs, 0, len(vals)+1)
	for i, v := range vals {
		xys = append(xys, plotter.XY{X: float64(i), Y: v})
	}
	if len(vals) > 0 {
		xys = append(xys, plotter.XY{X: float64(len(vals)), Y: vals[len(vals)-1]})
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.StepStyle = plotter.PostStep
	l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.2)}
	if dashed {
		l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	}
	return l, nil
}

// throughputPlot shows ok sends/s, ok polls/s and fail+info ops/s.
func throughputPlot(run *history.Run, ax timeAxis) plotResult {
	res := plotResult{ID: "plot-throughput", Title: "Throughput (1 s buckets)"}
	if len(run.Ops) == 0 {
		res.Caption = "No operations in this history."
		return res
	}
	b, sends, polls := countBuckets(run.Ops, ax)
	ch := newFigure(res.Title, "ops/s", ax)
	ymax := 1.0
	for _, s := range []struct {
		vals  []float64
		color color.NRGBA
		label string
		show  bool
	}{
		{b.sendOK, okColor, "send ok/s", sends},
		{b.pollOK, pollColor, "poll ok/s", polls},
		{b.other, failColor, "fail+info/s (all kinds)", true},
	} {
		if !s.show {
			continue
		}
		l, err := stepLine(s.vals, s.color, false)
		if err != nil {
			res.Err = err.Error()
			return res
		}
		for _, v := range s.vals {
			ymax = max(ymax, v)
		}
		ch.p.Add(l)
		ch.legend.Add(s.label, l)
	}
	ch.p.Y.Min, ch.p.Y.Max = 0, ymax*1.05
	svg, err := ch.finish()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.SVG = svg
	res.Caption = "Operations completed per second, by completion time."
	return res
}

// offsetsPlot shows, per queue (or in total when there are many queues),
// the head of the log as acknowledged to senders (highest ok send offset +
// 1) and how far pollers have read (highest ok poll Next): the gap between
// the two is the consumer lag.
func offsetsPlot(run *history.Run, ax timeAxis) plotResult {
	res := plotResult{ID: "plot-offsets", Title: "Queue offsets: acked head vs. polled"}
	nb := max(1, int(math.Ceil(ax.Max)))
	type series struct{ head, next []float64 }
	perQueue := map[int]*series{}
	get := func(q int) *series {
		s := perQueue[q]
		if s == nil {
			s = &series{head: filled(nb, -1), next: filled(nb, -1)}
			perQueue[q] = s
		}
		return s
	}
	for _, op := range run.Ops {
		if op.Outcome != history.OK || op.Complete < op.Invoke {
			continue
		}
		i := min(max(int(op.Complete/int64(nsPerSec)), 0), nb-1)
		switch op.Kind {
		case history.Send:
			s := get(op.Queue)
			s.head[i] = max(s.head[i], float64(op.Offset+1))
		case history.Poll:
			next := op.Next
			for _, m := range op.Msgs {
				next = max(next, m.Offset+1)
			}
			s := get(op.Queue)
			s.next[i] = max(s.next[i], float64(next))
		}
	}
	if len(perQueue) == 0 {
		res.Caption = "No acknowledged sends or polls in this history."
		return res
	}
	queues := make([]int, 0, len(perQueue))
	for q, s := range perQueue {
		runningMax(s.head)
		runningMax(s.next)
		queues = append(queues, q)
	}
	sort.Ints(queues)
	type line struct {
		label string
		vals  []float64
		color color.NRGBA
		dash  bool
	}
	var lines []line
	if len(queues) <= maxQueueSeries {
		for i, q := range queues {
			c := queueColor(i)
			lines = append(lines,
				line{fmt.Sprintf("q%d acked head", q), perQueue[q].head, c, false},
				line{fmt.Sprintf("q%d polled", q), perQueue[q].next, c, true})
		}
	} else {
		head, next := make([]float64, nb), make([]float64, nb)
		for _, q := range queues {
			for i := range nb {
				head[i] += max(perQueue[q].head[i], 0)
				next[i] += max(perQueue[q].next[i], 0)
			}
		}
		lines = append(lines,
			line{fmt.Sprintf("acked head, %d queues", len(queues)), head, okColor, false},
			line{fmt.Sprintf("polled, %d queues", len(queues)), next, pollColor, true})
	}
	ch := newFigure(res.Title, "offset", ax)
	ymax := 1.0
	for _, l := range lines {
		first := 0
		for first < len(l.vals) && l.vals[first] < 0 {
			first++
		}
		if first == len(l.vals) {
			continue // no data for this series
		}
		pl, err := stepLine(l.vals[first:], l.color, l.dash)
		if err != nil {
			res.Err = err.Error()
			return res
		}
		for i := range pl.XYs {
			pl.XYs[i].X += float64(first)
			ymax = max(ymax, pl.XYs[i].Y)
		}
		ch.p.Add(pl)
		ch.legend.Add(l.label, pl)
	}
	ch.p.Y.Min, ch.p.Y.Max = 0, ymax*1.05
	svg, err := ch.finish()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.SVG = svg
	res.Caption = "Solid: highest acknowledged send offset + 1; dashed: highest offset pollers have read up to. The gap is the consumer lag."
	return res
}

// filled returns a slice of n copies of v.
func filled(n int, v float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// runningMax replaces each element by the maximum of it and all before it.
func runningMax(s []float64) {
	for i := 1; i < len(s); i++ {
		s[i] = max(s[i], s[i-1])
	}
}

// queueColor is the color of the i-th queue on the offsets plot.
func queueColor(i int) color.NRGBA {
	switch i % maxQueueSeries {
	case 0:
		return okColor
	case 1:
		return pollColor
	case 2:
		return chart.Purple
	case 3:
		return infoColor
	case 4:
		return chart.Brown
	default:
		return chart.Cyan
	}
}

// plots renders every plot of a run.
func plots(run *history.Run) []plotResult {
	ax := newTimeAxis(run)
	return []plotResult{
		latencyPlot(run, ax),
		throughputPlot(run, ax),
		offsetsPlot(run, ax),
	}
}
