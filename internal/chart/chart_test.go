package chart

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// svgColor is how the SVG writer spells a colour in a style.
func svgColor(i int) string {
	c := Palette(i)
	return strings.ToUpper(fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B))
}

// A line chart is an inline SVG element (no XML prolog) with the title,
// a legend entry per series that has points, in palette order, and a
// stroke of each series' colour; a series without points is left out.
func TestLineChart(t *testing.T) {
	svg, err := LineChart("Lag over the last 60 s", "messages behind", 60, []Series{
		{Name: "total", Points: [][2]float64{{0, 10}, {30, 20}, {60, 5}}},
		{Name: "empty"},
		{Name: "orders", Points: [][2]float64{{0, 4}, {60, 8}}},
	})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(svg, "<svg"), svg[:min(len(svg), 80)])
	require.Contains(t, svg, "Lag over the last 60 s")
	require.Contains(t, svg, "messages behind")
	require.Contains(t, svg, ">total<")
	require.Contains(t, svg, ">orders<")
	require.NotContains(t, svg, ">empty<")
	require.Contains(t, svg, "stroke:"+svgColor(0))
	require.Contains(t, svg, "stroke:"+svgColor(2))
	require.NotContains(t, svg, "stroke:"+svgColor(1), "the empty series takes no colour of its own but is not drawn")
}

// Windows are shaded; a log axis is marked at 1, 2 and 5 times each power
// of ten within the data's range.
func TestRenderWindowsAndLogAxis(t *testing.T) {
	l := Line{Name: "p99", Color: Orange}
	l.Add(0, 3, false)
	l.Add(1, 40, false)
	l.Add(3, 700, true)
	spec := Spec{Title: "Latency", YLabel: "ms", End: 4, LogY: true, Lines: []Line{l}}
	plain, err := Render(spec)
	require.NoError(t, err)
	spec.Windows = []Window{{From: 1, To: 2}}
	shaded, err := Render(spec)
	require.NoError(t, err)
	fill := regexp.MustCompile(`fill:#[0-9A-F]{6};fill-opacity:0\.25`)
	require.False(t, fill.MatchString(plain))
	require.True(t, fill.MatchString(shaded), "no shaded window")
	for _, tick := range []string{">5<", ">10<", ">20<", ">50<", ">100<", ">200<", ">500<"} {
		require.Contains(t, plain, tick)
	}
	// Two segments: the break at x=3 starts a new path.
	require.Equal(t, 2, strings.Count(plain, "stroke:#FF7F0E"))
}

func TestPaletteRepeats(t *testing.T) {
	require.Equal(t, Blue, Palette(0))
	require.Equal(t, Palette(1), Palette(9))
	require.Equal(t, Palette(7), Palette(-1))
}

// With Start, the time axis is labelled with UTC clock times, not
// seconds since the start.
func TestWallClockAxis(t *testing.T) {
	start := time.Date(2026, 11, 28, 13, 47, 0, 0, time.UTC)
	l := Line{Name: "lag", Color: Palette(0)}
	for i := range 13 {
		l.Add(float64(10*i), float64(100-i), false)
	}
	svg, err := Render(Spec{Title: "Lag", YLabel: "messages", End: 120, Start: start, Lines: []Line{l}})
	require.NoError(t, err)
	require.Contains(t, svg, "time (UTC)")
	require.Contains(t, svg, "13:47:")
	require.Contains(t, svg, "13:48:")
	require.NotContains(t, svg, "seconds since")
}
