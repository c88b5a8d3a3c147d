package bench

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/raftmq/raftmq/internal/chart"
)

// WriteHTML writes a self-contained HTML report of a run: its summary,
// throughput and errors per step, latency per step (p50, p99 and max, on a
// log scale) and, for a failover run, each kill as a shaded band from the
// kill to the next acknowledged send, with a table of them.
func WriteHTML(w io.Writer, title, summary, latencyOf string, series []Interval, kills []KillWindow) error {
	return WriteHTMLTrace(w, title, summary, latencyOf, series, kills, nil)
}

// WriteHTMLTrace is WriteHTML with a send trace's breakdown, if trace is
// not nil, drawn below the latency.
func WriteHTMLTrace(w io.Writer, title, summary, latencyOf string, series []Interval, kills []KillWindow, trace *Breakdown) error {
	end := 0.0
	if n := len(series); n > 0 {
		end = series[n-1].Start + 2*(series[n-1].Start-series[max(n-2, 0)].Start)
	}
	for _, k := range kills {
		end = max(end, k.Recovered)
	}
	rate, errs := chart.Line{Name: "msgs/s", Color: chart.Blue}, chart.Line{Name: "failed " + latencyOf + "s per step", Color: chart.Red}
	p50, p99, pmax := chart.Line{Name: "p50", Color: chart.Green}, chart.Line{Name: "p99", Color: chart.Orange}, chart.Line{Name: "max", Color: chart.Purple}
	anyErr := false
	for _, s := range series {
		anyErr = anyErr || s.Errors > 0
	}
	for i, s := range series {
		rate.Add(s.Start, s.Rate, false)
		if anyErr {
			errs.Add(s.Start, float64(s.Errors), false)
		}
		// A step without answers breaks the latency lines rather than
		// joining its neighbours across the gap.
		gap := i > 0 && series[i-1].P50 == 0
		if s.P50 > 0 {
			p50.Add(s.Start, s.P50, gap)
			p99.Add(s.Start, s.P99, gap)
			pmax.Add(s.Start, s.Max, gap)
		}
	}
	windows := make([]chart.Window, len(kills))
	for i, k := range kills {
		windows[i] = chart.Window{From: k.At, To: k.Recovered}
	}
	tput, err := chart.Render(chart.Spec{Title: "Throughput", YLabel: "messages per second", End: end, Windows: windows,
		Lines: []chart.Line{rate, errs}})
	if err != nil {
		return err
	}
	// A run without latency samples (push consumers: their pulls are the
	// client's own) gets a note instead of an empty log-scale chart.
	lat := "<p>No latency recorded for this run.</p>"
	if !p50.Empty() {
		if lat, err = chart.Render(chart.Spec{Title: "Latency of each " + latencyOf, YLabel: "milliseconds (log scale)", End: end,
			LogY: true, Windows: windows, Lines: []chart.Line{pmax, p99, p50}}); err != nil {
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
	if trace != nil {
		b.WriteString(trace.HTML())
	}
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
