package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/raftmq/raftmq/jepsen/history"
)

const sec = int64(1e9)

// synthRun builds a run of a few hundred ops with every outcome, two fault
// windows and Healed set, writes its files into a new directory and
// returns the directory, the run and failing results.
func synthRun(t *testing.T) (string, *history.Run, history.Results) {
	t.Helper()
	dir := t.TempDir()
	run := &history.Run{Dir: dir}
	run.Meta = history.Meta{
		Workload: "queue", Nemesis: []string{"partition", "kill"}, Seed: 4242,
		TimeLimit: "50s", Rate: 10, Queues: 2, Nodes: 3, NetMode: "iptables",
		Mutant: "skip-fsync", Started: "2025-03-01T10:00:00Z",
		Duration: 50 * sec, Healed: 36 * sec,
	}
	offsets := map[int]int64{}
	id := int64(0)
	for i := range 400 {
		at := int64(i) * 50 * sec / 400 // spread over 50 s
		op := history.Op{ID: id, Process: i % 7, Queue: i % 2, Node: 1 + i%3, Invoke: at, Complete: at + int64(1+i%40)*1e6}
		id++
		switch {
		case i%4 == 3:
			op.Kind = history.Poll
			op.Offset = offsets[op.Queue] / 2
			op.Next = offsets[op.Queue]
			op.Msgs = []history.Msg{{Offset: op.Next - 1, Value: "x"}}
		case i%20 == 2:
			op.Kind = history.Commit
			op.Group = "g"
		case i%20 == 6:
			op.Kind = history.Fetch
			op.Group = "g"
		default:
			op.Kind = history.Send
			op.Value = fmt.Sprintf("p%d-%d", op.Process, i)
		}
		switch {
		case i%11 == 5:
			op.Outcome, op.Error = history.Fail, "not leader"
		case i%13 == 7:
			op.Outcome, op.Error = history.Info, "timeout"
			op.Complete = op.Invoke + 2*sec
		default:
			op.Outcome = history.OK
			if op.Kind == history.Send {
				op.Offset = offsets[op.Queue]
				offsets[op.Queue]++
			}
		}
		run.Ops = append(run.Ops, op)
	}
	run.Events = []history.Event{
		{Kind: "partition", Start: 10 * sec, End: 20 * sec, Nodes: []int{1, 2}, Description: "isolate n1,n2 <majority>"},
		{Kind: "kill", Start: 30 * sec, End: 36 * sec, Nodes: []int{3}, Description: "SIGKILL n3", Error: "restart slow"},
	}
	run.Replicas = []history.Replica{{Node: 1, Commit: 10, First: 1, Entries: make([]history.Entry, 10)}}
	res := history.Results{
		Valid: false,
		Checkers: map[string]history.CheckerResult{
			"queue-lost": {Valid: true, Counts: map[string]int64{"lost": 0, "acked": 250}},
			"linearizable": {Valid: false, Counts: map[string]int64{"ops": 400},
				Errors: []string{"op 17 <script>alert(1)</script> not linearizable", "op 18 too"},
				Note:   "porcupine timed out on queue 1"},
		},
		Faults: map[string]int64{"partition": 1, "kill": 1},
	}
	writeRunFiles(t, dir, run, &res)
	for _, n := range []string{"n1", "n2", "n10"} {
		mustWrite(t, filepath.Join(dir, "nodes", n, "broker.log"), "log of "+n+"\n")
	}
	mustWrite(t, filepath.Join(dir, LinearizabilityFile), "<html><body>porcupine</body></html>")
	return dir, run, res
}

// writeRunFiles writes the files of run (and res, if not nil) into dir.
func writeRunFiles(t *testing.T, dir string, run *history.Run, res *history.Results) {
	t.Helper()
	write := func(name string, vs func(w *history.Writer) error) {
		w, err := history.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := vs(w); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write(history.HistoryFile, func(w *history.Writer) error {
		for _, op := range run.Ops {
			if err := w.Write(op); err != nil {
				return err
			}
		}
		return nil
	})
	write(history.NemesisFile, func(w *history.Writer) error {
		for _, ev := range run.Events {
			if err := w.Write(ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err := history.WriteJSON(filepath.Join(dir, history.RunFile), run.Meta); err != nil {
		t.Fatal(err)
	}
	if err := history.WriteJSON(filepath.Join(dir, history.ReplicasFile), run.Replicas); err != nil {
		t.Fatal(err)
	}
	if res != nil {
		if err := history.WriteJSON(filepath.Join(dir, history.ResultsFile), res); err != nil {
			t.Fatal(err)
		}
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeReport runs Write and returns report.html.
func writeReport(t *testing.T, dir string, run *history.Run, res history.Results) string {
	t.Helper()
	if err := Write(dir, run, res); err != nil {
		t.Fatalf("Write: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, history.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, history.ReportFile+".tmp")); err == nil {
		t.Error("temporary file left behind")
	}
	return string(b)
}

// svgs returns the inline SVG elements of a page.
func svgs(page string) []string {
	return regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1)
}

// checkBalanced parses page with the HTML tokenizer and fails unless
// every non-void element is closed in order.
func checkBalanced(t *testing.T, page string) {
	t.Helper()
	void := map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true,
		"hr": true, "img": true, "input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true}
	z := html.NewTokenizer(strings.NewReader(page))
	var stack []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Fatalf("tokenize: %v", z.Err())
			}
			if len(stack) > 0 {
				t.Fatalf("unclosed elements at end: %v", stack)
			}
			return
		case html.StartTagToken:
			name, _ := z.TagName()
			if !void[string(name)] {
				stack = append(stack, string(name))
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if len(stack) == 0 || stack[len(stack)-1] != string(name) {
				t.Fatalf("</%s> does not close the open element (stack %v)", name, stack)
			}
			stack = stack[:len(stack)-1]
		}
	}
}

func TestWriteReport(t *testing.T) {
	dir, run, res := synthRun(t)
	page := writeReport(t, dir, run, res)
	checkBalanced(t, page)

	if !strings.Contains(page, `<span class="verdict invalid" id="verdict">INVALID</span>`) {
		t.Error("no INVALID verdict")
	}
	for _, want := range []string{
		"queue-lost", "linearizable", "porcupine timed out on queue 1", // checkers
		"4242", "skip-fsync", "iptables", "partition, kill", "50s", // meta
		`<td class="num">36.000</td>`,                    // kill ends at 36 s
		"isolate n1,n2 &lt;majority&gt;", "restart slow", // timeline
		`href="history.jsonl"`, `href="nemesis.jsonl"`, `href="results.json"`,
		`<iframe class="linearizability" src="linearizability.html" loading="lazy"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The failing checker comes first.
	if strings.Index(page, "<strong>linearizable</strong>") > strings.Index(page, "<strong>queue-lost</strong>") {
		t.Error("failing checker not listed first")
	}
	if strings.Contains(page, "<script") {
		t.Error("unescaped <script> from checker errors")
	}
	// Node logs are linked in node order.
	i1, i2, i10 := strings.Index(page, `href="nodes/n1/broker.log"`),
		strings.Index(page, `href="nodes/n2/broker.log"`), strings.Index(page, `href="nodes/n10/broker.log"`)
	if i1 < 0 || i2 < 0 || i10 < 0 || !(i1 < i2 && i2 < i10) {
		t.Errorf("node log links missing or out of order: %d %d %d", i1, i2, i10)
	}
	// Self-contained: nothing loaded from elsewhere.
	for _, bad := range []string{`src="http`, `href="http`, `<link`, `@import`, `url(`} {
		if strings.Contains(page, bad) {
			t.Errorf("report references external resource: %q", bad)
		}
	}
	if n := strings.Count(page, `<tr class="fault`); n != 2 {
		t.Errorf("timeline has %d rows, want 2", n)
	}

	// Op counts: 400 ops in total.
	if !regexp.MustCompile(`<th>total</th>(<th class="num">\d+</th>){3}<th class="num">400</th>`).MatchString(page) {
		t.Error("op table total is not 400")
	}

	plots := svgs(page)
	if len(plots) != 3 {
		t.Fatalf("%d inline SVGs, want 3 (latency, throughput, offsets)", len(plots))
	}
	for i, svg := range plots {
		if n := strings.Count(svg, `class="fault-band `); n != 2 {
			t.Errorf("svg %d: %d fault bands, want one per fault window (2)", i, n)
		}
		if strings.Count(svg, `class="fault-band fault-partition"`) != 1 || strings.Count(svg, `class="fault-band fault-kill"`) != 1 {
			t.Errorf("svg %d: bands not classed by kind", i)
		}
		if !strings.Contains(svg, "stroke:"+strings.ToUpper(cssColor(hexColor(healedRGB)))) {
			t.Errorf("svg %d: no healed line", i)
		}
		if !strings.Contains(svg, "<title>partition 10.0s–20.0s nodes 1,2: isolate n1,n2 &lt;majority&gt;</title>") {
			t.Errorf("svg %d: partition band has no tooltip", i)
		}
		for _, want := range []string{">partition<", ">kill<", ">healed<"} { // legend
			if !strings.Contains(svg, want) {
				t.Errorf("svg %d: legend lacks %s", i, want)
			}
		}
		if strings.Contains(svg, "<?xml") {
			t.Errorf("svg %d: XML prolog left in HTML", i)
		}
	}
	for _, want := range []string{">ok (", ">fail (", ">info (at top) ("} {
		if !strings.Contains(plots[0], want) {
			t.Errorf("latency plot legend lacks %q", want)
		}
	}
}

func TestWriteValidMinimal(t *testing.T) {
	dir := t.TempDir()
	run := &history.Run{Dir: dir, Meta: history.Meta{Workload: "queue", Seed: 1}}
	page := writeReport(t, dir, run, history.Results{Valid: true,
		Checkers: map[string]history.CheckerResult{"queue-lost": {Valid: true}}})
	checkBalanced(t, page)
	if !strings.Contains(page, `<span class="verdict valid" id="verdict">VALID</span>`) {
		t.Error("no VALID verdict")
	}
	if strings.Contains(page, "INVALID") {
		t.Error("valid run shows INVALID")
	}
	if n := len(svgs(page)); n != 0 {
		t.Errorf("%d plots of an empty history", n)
	}
	for _, absent := range []string{"mutant", "<iframe", "healed at", "history.jsonl"} {
		if strings.Contains(page, absent) {
			t.Errorf("report of a bare run mentions %q", absent)
		}
	}
}

func TestWriteHarnessErrorAndActiveFault(t *testing.T) {
	dir := t.TempDir()
	run := &history.Run{Dir: dir, Meta: history.Meta{Duration: 10 * sec},
		Ops:    []history.Op{{Kind: history.Send, Outcome: history.Info, Invoke: 2 * sec}}, // never completed
		Events: []history.Event{{Kind: "strange fault!", Start: 5 * sec}}}                  // active at end
	page := writeReport(t, dir, run, history.Results{Error: "cluster did not start"})
	checkBalanced(t, page)
	for _, want := range []string{"INVALID", "Harness error:", "cluster did not start", "active at end"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for i, svg := range svgs(page) {
		if n := strings.Count(svg, `class="fault-band fault-strange-fault-"`); n != 1 {
			t.Errorf("svg %d: %d bands of the active fault, want 1", i, n)
		}
	}
}

func TestWriteNilRun(t *testing.T) {
	if err := Write(t.TempDir(), nil, history.Results{}); err == nil {
		t.Fatal("Write(nil run) succeeded")
	}
}

func TestWriteMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	if err := Write(dir, &history.Run{}, history.Results{}); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

func TestThin(t *testing.T) {
	var pts []latPoint
	for i := range 30000 {
		o := history.OK
		switch {
		case i%60 == 1:
			o = history.Fail
		case i%60 == 2:
			o = history.Info
		}
		pts = append(pts, latPoint{x: float64(i), y: 1, outcome: o})
	}
	out, sampled := thin(pts, 20000)
	if !sampled || len(out) > 20000 || len(out) < 19000 {
		t.Fatalf("thin kept %d points (sampled %v), want about 20000", len(out), sampled)
	}
	var fails, infos, oks int
	for i, p := range out {
		if i > 0 && p.x <= out[i-1].x {
			t.Fatal("thin reordered points or kept one twice")
		}
		switch p.outcome {
		case history.Fail:
			fails++
		case history.Info:
			infos++
		default:
			oks++
		}
	}
	if fails != 500 || infos != 500 {
		t.Errorf("thin kept %d fails, %d infos; want every one (500 each)", fails, infos)
	}
	if out[0].x != 0 || out[len(out)-1].x < 29000 {
		t.Errorf("ok sample not spread over the run: first %v last %v", out[0].x, out[len(out)-1].x)
	}
	again, _ := thin(pts, 20000)
	if len(again) != len(out) || again[len(again)/2] != out[len(out)/2] {
		t.Error("thin is not deterministic")
	}
	small := pts[:1000]
	if got, sampled := thin(small, 20000); sampled || len(got) != 1000 {
		t.Errorf("thin changed a small set: %d points, sampled %v", len(got), sampled)
	}
	// Mostly failures: ok points still get a tenth of the budget.
	var bad []latPoint
	for i := range 30000 {
		o := history.Fail
		if i%15 < 2 { // 4000 ok, 26000 fail
			o = history.OK
		}
		bad = append(bad, latPoint{x: float64(i), outcome: o})
	}
	out, _ = thin(bad, 20000)
	oks = 0
	for _, p := range out {
		if p.outcome == history.OK {
			oks++
		}
	}
	if oks != 2000 || len(out) != 28000 {
		t.Errorf("mostly-fail thin: %d ok of %d, want 2000 of 28000", oks, len(out))
	}
}

func TestLatencyPlotDownsamples(t *testing.T) {
	run := &history.Run{Meta: history.Meta{Duration: 100 * sec}}
	for i := range 25000 {
		o := history.OK
		if i%100 == 0 {
			o = history.Fail
		}
		at := int64(i) * 4e6
		lat := int64(1e6 + (i*7919%10007)*1e5) // 1 ms .. 1 s, scattered
		run.Ops = append(run.Ops, history.Op{ID: int64(i), Kind: history.Send, Outcome: o, Invoke: at, Complete: at + lat})
	}
	p := latencyPlot(run, newTimeAxis(run))
	if p.Err != "" || p.SVG == "" {
		t.Fatalf("latency plot failed: %q", p.Err)
	}
	var drawn int
	if _, err := fmt.Sscanf(p.Caption[strings.Index(p.Caption, ". ")+2:], "%d of 25000 sends drawn", &drawn); err != nil {
		t.Fatalf("caption %q does not report downsampling: %v", p.Caption, err)
	}
	if drawn > maxScatterPoints || drawn < maxScatterPoints*9/10 || !strings.Contains(p.Caption, "downsampled evenly") {
		t.Errorf("caption %q: want about %d points drawn, downsampled", p.Caption, maxScatterPoints)
	}
	if !strings.Contains(p.SVG, ">fail (250)<") || !strings.Contains(p.SVG, ">ok (24750)<") {
		t.Error("legend does not count every send")
	}
	// 250 fail glyphs and the legend's: count the subpaths of fail fills.
	glyphs := 0
	failFill := regexp.MustCompile(`<path d="([^"]*)" style="fill:` + strings.ToUpper(cssColor(failColor)) + `"`)
	for _, m := range failFill.FindAllStringSubmatch(p.SVG, -1) {
		glyphs += strings.Count(m[1], "M")
	}
	if glyphs != 251 {
		t.Errorf("%d fail glyphs drawn, want 250 + legend", glyphs-1)
	}
	if n := strings.Count(p.SVG, "<path"); n > maxScatterPoints+200 {
		t.Errorf("%d paths in the SVG", n)
	}
}

func TestMergeOverlaps(t *testing.T) {
	pts := []latPoint{
		{x: 1.0, y: 10, outcome: history.OK},
		{x: 1.01, y: 10.01, outcome: history.OK},   // same cell: merged
		{x: 1.01, y: 10.01, outcome: history.Fail}, // kept
		{x: 1.01, y: 10.01, outcome: history.Info}, // kept
		{x: 2.0, y: 10, outcome: history.OK},       // other x cell
		{x: 1.0, y: 100, outcome: history.OK},      // other y cell
	}
	got := mergeOverlaps(pts, 0.1, 0.01)
	if len(got) != 5 || got[1].outcome != history.Fail || got[3].x != 2.0 {
		t.Errorf("mergeOverlaps = %+v", got)
	}
	if len(mergeOverlaps(pts, 0, 0.01)) != len(pts) {
		t.Error("zero cell size merged points")
	}
}

func TestMergeFills(t *testing.T) {
	in := strings.Join([]string{
		`<svg>`,
		`<path d="M1,1Z" style="fill:#FF0000" />`,
		`<path d="M2,2Z" style="fill:#FF0000" />`,
		`<path d="M3,3Z" style="fill:#00FF00;fill-opacity:0.5" />`,
		`<path class="fault-band" d="M4,4Z" style="fill:#00FF00;fill-opacity:0.5"><title>x</title></path>`,
		`<path d="M5,5Z" style="fill:#00FF00;fill-opacity:0.5" />`,
		`<path d="M6,6Z" style="fill:none;stroke:#000000" />`,
		`<path d="M7,7Z" style="fill:none;stroke:#000000" />`,
		`</svg>`,
	}, "\n")
	want := strings.Join([]string{
		`<svg>`,
		`<path d="M1,1ZM2,2Z" style="fill:#FF0000" />`,
		`<path d="M3,3Z" style="fill:#00FF00;fill-opacity:0.5" />`,
		`<path class="fault-band" d="M4,4Z" style="fill:#00FF00;fill-opacity:0.5"><title>x</title></path>`,
		`<path d="M5,5Z" style="fill:#00FF00;fill-opacity:0.5" />`,
		`<path d="M6,6Z" style="fill:none;stroke:#000000" />`,
		`<path d="M7,7Z" style="fill:none;stroke:#000000" />`,
		`</svg>`,
	}, "\n")
	if got := mergeFills(in); got != want {
		t.Errorf("mergeFills:\n%s\nwant:\n%s", got, want)
	}
}

func TestNaturalLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"nodes/n2/x", "nodes/n10/x", true},
		{"nodes/n10/x", "nodes/n2/x", false},
		{"a", "b", true},
		{"a", "a1", true},
		{"n01", "n1", false},
	} {
		if got := naturalLess(c.a, c.b); got != c.want {
			t.Errorf("naturalLess(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
