package console

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The plots' x axis is wall-clock time: tick labels are UTC clock times
// within the samples' span, not seconds since the first sample.
func TestTimePlotWallClock(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 13, 47, 0, 0, time.UTC)
	var s series
	s.name = "total"
	for i := range 13 {
		s.at = append(s.at, t0.Add(time.Duration(i)*10*time.Second))
		s.v = append(s.v, float64(100-i))
	}
	svg, err := timePlot("Lag", "messages behind", []series{s})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(svg, "<svg"))
	require.Contains(t, svg, "time (UTC)")
	require.Contains(t, svg, "13:47:")
	require.Contains(t, svg, "13:48:")
	require.NotContains(t, svg, "seconds since")
}
