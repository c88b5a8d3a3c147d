package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/internal/chart"
)

// Breakdown is where sampled sends spent their time on the leader, stage by
// stage (the broker's /debug/sendtrace): each stage's p50 and p99 in
// microseconds, the total's, and the second follower's ack.
type Breakdown struct {
	Every   uint64         `json:"every"`
	Samples int            `json:"samples"`
	Stages  []StageLatency `json:"stages"`
	Total   StageLatency   `json:"total"`
	// SecondAck is when the second follower's ack arrived, since the send
	// was received (samples that had it).
	SecondAck StageLatency `json:"secondAck"`
}

// StageLatency is one stage's percentiles: the time from the stage before
// it (From) to it (To).
type StageLatency struct {
	From  string  `json:"from,omitempty"`
	To    string  `json:"to"`
	P50US float64 `json:"p50us"`
	P99US float64 `json:"p99us"`
}

// SetTracing asks every broker at httpAddrs (their HTTP ports) to trace one
// send in every (0: stop) and forget the traces it kept. It fails unless
// at least one answers; the leader is the one whose traces count.
func SetTracing(ctx context.Context, httpAddrs []string, every int) error {
	var errs []string
	ok := 0
	for _, a := range httpAddrs {
		err := func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/debug/sendtrace?every=%d", a, every), nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
			}
			return nil
		}()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		ok++
	}
	if ok == 0 {
		return fmt.Errorf("bench: no broker took the trace setting: %s", strings.Join(errs, "; "))
	}
	return nil
}

// FetchTraces reads /debug/sendtrace from every broker at httpAddrs and
// returns the breakdown of the one with the most samples (the leader's,
// unless the leadership moved during the run).
func FetchTraces(ctx context.Context, httpAddrs []string) (*Breakdown, error) {
	var best *cluster.SendTraceReport
	var errs []string
	for _, a := range httpAddrs {
		rep, err := fetchTrace(ctx, a)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		if best == nil || len(rep.Samples) > len(best.Samples) {
			best = rep
		}
	}
	if best == nil {
		return nil, fmt.Errorf("bench: no broker answered with its traces: %s", strings.Join(errs, "; "))
	}
	if len(best.Samples) == 0 {
		return nil, fmt.Errorf("bench: no send was traced (one in %d sampled)", best.Every)
	}
	return Summarize(best), nil
}

func fetchTrace(ctx context.Context, addr string) (*cluster.SendTraceReport, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/sendtrace", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	var rep cluster.SendTraceReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return &rep, nil
}

// Summarize computes the percentiles of a broker's trace report.
func Summarize(rep *cluster.SendTraceReport) *Breakdown {
	b := &Breakdown{Every: rep.Every, Samples: len(rep.Samples)}
	n := len(rep.Stages) - 1
	vals := make([]float64, 0, len(rep.Samples))
	for i := 0; i < n; i++ {
		vals = vals[:0]
		for _, s := range rep.Samples {
			if len(s.StagesUS) == n {
				vals = append(vals, s.StagesUS[i])
			}
		}
		b.Stages = append(b.Stages, pcts(rep.Stages[i], rep.Stages[i+1], vals))
	}
	vals = vals[:0]
	for _, s := range rep.Samples {
		vals = append(vals, s.TotalUS)
	}
	b.Total = pcts(rep.Stages[0], rep.Stages[n], vals)
	vals = vals[:0]
	for _, s := range rep.Samples {
		if s.SecondAck >= 0 {
			vals = append(vals, s.SecondAck)
		}
	}
	b.SecondAck = pcts(rep.Stages[0], "ack2", vals)
	return b
}

func pcts(from, to string, vals []float64) StageLatency {
	s := StageLatency{From: from, To: to}
	if len(vals) == 0 {
		return s
	}
	v := slices.Clone(vals)
	slices.Sort(v)
	at := func(q float64) float64 { return v[min(len(v)-1, int(q*float64(len(v))))] }
	s.P50US, s.P99US = at(0.50), at(0.99)
	return s
}

// String is the breakdown as a table: one line per stage. The p50s of
// the stages need not add up to the total's p50; each sample's stages do
// add up to its total.
func (b *Breakdown) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "send trace on the leader: %d samples (one send in %d)\n", b.Samples, b.Every)
	fmt.Fprintf(&s, "  %-30s %10s %10s\n", "stage", "p50 µs", "p99 µs")
	for _, st := range b.Stages {
		fmt.Fprintf(&s, "  %-30s %10.1f %10.1f\n", st.From+" → "+st.To, st.P50US, st.P99US)
	}
	fmt.Fprintf(&s, "  %-30s %10.1f %10.1f\n", "total (received → answered)", b.Total.P50US, b.Total.P99US)
	fmt.Fprintf(&s, "  %-30s %10.1f %10.1f\n", "second follower's ack", b.SecondAck.P50US, b.SecondAck.P99US)
	return s.String()
}

// HTML is the breakdown as a stacked timeline: for the p50 and the p99 of
// each stage, a bar from received to answered cut into the stages, and the
// table.
func (b *Breakdown) HTML() string {
	const width, rowH, left = 760.0, 28.0, 40.0
	var s strings.Builder
	s.WriteString("<h2>Where a send's time goes (leader)</h2>\n")
	fmt.Fprintf(&s, "<p>%d sampled sends (one in %d). Each bar runs from the request's arrival to its answer, cut into the stages at their p50 (top) and at their p99 (bottom; the stages' p99s need not come from one send); each bar has its own scale, its length in µs at its end.</p>\n",
		b.Samples, b.Every)
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-size="11" font-family="sans-serif">`+"\n", width, 2*rowH+70)
	for row, pick := range []func(StageLatency) float64{
		func(l StageLatency) float64 { return l.P50US },
		func(l StageLatency) float64 { return l.P99US },
	} {
		full := 0.0
		for _, st := range b.Stages {
			full += pick(st)
		}
		scale := (width - left - 90) / max(full, 1)
		y := 10 + float64(row)*(rowH+6)
		fmt.Fprintf(&s, `<text x="0" y="%.0f">%s</text>`, y+rowH/2+4, []string{"p50", "p99"}[row])
		x := left
		for i, st := range b.Stages {
			w := pick(st) * scale
			c := chart.Palette(i)
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="rgb(%d,%d,%d)"><title>%s → %s: %.1f µs</title></rect>`,
				x, y, w, rowH, c.R, c.G, c.B, html.EscapeString(st.From), html.EscapeString(st.To), pick(st))
			x += w
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f">%.0f µs</text>`+"\n", x+4, y+rowH/2+4, (x-left)/scale)
	}
	ly := 2*rowH + 30
	for i, st := range b.Stages {
		c := chart.Palette(i)
		lx := left + float64(i%4)*180
		yy := ly + float64(i/4)*14
		fmt.Fprintf(&s, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="rgb(%d,%d,%d)"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			lx, yy, c.R, c.G, c.B, lx+14, yy+9, html.EscapeString(st.From+" → "+st.To))
	}
	s.WriteString("</svg>\n<table><tr><th>stage</th><th>p50 µs</th><th>p99 µs</th></tr>\n")
	for _, st := range append(slices.Clone(b.Stages), b.Total, b.SecondAck) {
		fmt.Fprintf(&s, "<tr><td>%s → %s</td><td>%.1f</td><td>%.1f</td></tr>\n", html.EscapeString(st.From), html.EscapeString(st.To), st.P50US, st.P99US)
	}
	s.WriteString("</table>\n")
	return s.String()
}
