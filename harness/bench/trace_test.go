package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/raftlog"
)

// The breakdown's percentiles come from the samples, stage by stage, and
// the report draws one bar segment per stage and row.
func TestSummarizeTrace(t *testing.T) {
	rep := &cluster.SendTraceReport{Every: 4, Stages: raftlog.StageNames[:]}
	n := raftlog.NumStages - 1
	for i := 1; i <= 100; i++ {
		s := cluster.SendTraceSample{StagesUS: make([]float64, n), SecondAck: -1}
		for j := range s.StagesUS {
			s.StagesUS[j] = float64(i * (j + 1))
			s.TotalUS += s.StagesUS[j]
		}
		if i%2 == 0 {
			s.SecondAck = float64(1000 + i)
		}
		rep.Samples = append(rep.Samples, s)
	}
	b := Summarize(rep)
	require.Equal(t, 100, b.Samples)
	require.Len(t, b.Stages, n)
	require.Equal(t, "received", b.Stages[0].From)
	require.Equal(t, "proposed", b.Stages[0].To)
	require.Equal(t, 51.0, b.Stages[0].P50US)
	require.Equal(t, 100.0, b.Stages[0].P99US)
	require.Equal(t, float64(51*n), b.Stages[n-1].P50US)
	require.Equal(t, float64(51*n*(n+1)/2), b.Total.P50US)
	require.Equal(t, 1000.0+52, b.SecondAck.P50US, "only the samples with a second ack")
	require.Contains(t, b.String(), "fsynced → ack1")

	var page bytes.Buffer
	require.NoError(t, WriteHTMLTrace(&page, "t", "s", "send", nil, nil, b))
	require.Equal(t, 2*n, strings.Count(page.String(), "<rect")-n, "a segment per stage and row, and a legend swatch per stage")
	require.Contains(t, page.String(), "received → answered")
}
