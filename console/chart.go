package console

import (
	"time"

	"github.com/raftmq/raftmq/internal/chart"
)

// series is a line of a time plot: values at wall-clock times.
type series struct {
	name string
	at   []time.Time
	v    []float64
}

// timePlot renders lines over wall-clock time (UTC, as every time the
// console shows) as an inline SVG element.
func timePlot(title, ylabel string, lines []series) (string, error) {
	var start, end time.Time
	for _, s := range lines {
		for _, at := range s.at {
			if start.IsZero() || at.Before(start) {
				start = at
			}
			if at.After(end) {
				end = at
			}
		}
	}
	spec := chart.Spec{Title: title, YLabel: ylabel, Start: start, End: end.Sub(start).Seconds()}
	for i, s := range lines {
		l := chart.Line{Name: s.name, Color: chart.Palette(i)}
		for j, at := range s.at {
			l.Add(at.Sub(start).Seconds(), s.v[j], false)
		}
		if !l.Empty() {
			spec.Lines = append(spec.Lines, l)
		}
	}
	return chart.Render(spec)
}
