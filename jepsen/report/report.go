// Package report turns a chaos run directory into a self-contained HTML
// report (report.html: verdict, run parameters, checker results, fault
// timeline and inline SVG plots with every fault window shaded) and serves
// a browsable index of past runs over HTTP.
//
// The report has no external dependencies (no JavaScript, no stylesheets
// or fonts from elsewhere): it links only to files of its own run
// directory, so a run directory can be copied, archived or opened from
// disk as is.
package report

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// Files of a run directory the report links to besides those named in
// package history.
const (
	// LinearizabilityFile is porcupine's visualization, written by the
	// checker when it has one.
	LinearizabilityFile = "linearizability.html"
	// NodeLogPattern matches the node logs, relative to the run directory.
	NodeLogPattern = "nodes/*/broker.log"
)

// maxErrorsShown is how many errors of one checker the table shows.
const maxErrorsShown = 10

// Write renders the report of run, judged by res, into dir/report.html.
// The file is replaced atomically. Links to other files (history, node
// logs, the linearizability visualization) are made only for files that
// exist in dir when Write runs.
func Write(dir string, run *history.Run, res history.Results) error {
	if run == nil {
		return errors.New("report: nil run")
	}
	var buf bytes.Buffer
	if err := render(&buf, dir, run, &res, time.Now()); err != nil {
		return err
	}
	dst := filepath.Join(dir, history.ReportFile)
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// render writes the report of run to w. res may be nil when the run has no
// results (yet); the verdict is then UNKNOWN. dir is where linked files
// are looked for.
func render(w io.Writer, dir string, run *history.Run, res *history.Results, now time.Time) error {
	tmpl, err := parseTemplate("report", reportTemplate)
	if err != nil {
		return err
	}
	v := buildView(dir, run, res, now)
	if err := tmpl.Execute(w, v); err != nil {
		return fmt.Errorf("report: render: %w", err)
	}
	return nil
}

// kv is one labelled value.
type kv struct {
	Key, Value string
}

// reportView is what the report template shows.
type reportView struct {
	Title        string
	RunName      string
	Verdict      string // VALID, INVALID or UNKNOWN
	VerdictClass string // valid, invalid, unknown
	HarnessError string
	Meta         []kv
	Checkers     []checkerView
	Ops          opTable
	Faults       []faultCount
	Timeline     []eventView
	Plots        []plotResult
	SVGs         []template.HTML // parallel to Plots
	Files        []fileLink
	NodeLogs     []fileLink
	// Linearizability links porcupine's visualization ("" if absent).
	Linearizability string
	Replicas        []history.Replica
	Generated       string
}

// checkerView is one row of the checker table.
type checkerView struct {
	Name      string
	Valid     bool
	Counts    []kv
	Errors    []string
	MoreCount int
	Note      string
}

// opTable counts operations by kind (rows) and outcome (columns).
type opTable struct {
	Rows  []opRow
	Total opRow
}

// opRow is one kind's counts.
type opRow struct {
	Kind                         string
	OK, Fail, Info, Other, Total int64
}

// faultCount summarises the faults of one kind.
type faultCount struct {
	Kind    string
	Color   template.CSS
	Count   int64
	Seconds string // total time active ("" when counted from results only)
	Errors  int
}

// eventView is one row of the nemesis timeline.
type eventView struct {
	Kind        string
	Color       template.CSS
	Start, End  string
	Length      string
	Nodes       string
	Description string
	Error       string
}

// fileLink is a link to a file of the run directory.
type fileLink struct {
	Name string
	Href string
	Size string
}

// buildView computes everything the report shows.
func buildView(dir string, run *history.Run, res *history.Results, now time.Time) reportView {
	m := run.Meta
	v := reportView{
		RunName:   runName(dir),
		Generated: now.Format(time.RFC3339),
	}
	switch {
	case res == nil:
		v.Verdict, v.VerdictClass = "UNKNOWN", "unknown"
	case res.Valid:
		v.Verdict, v.VerdictClass = "VALID", "valid"
	default:
		v.Verdict, v.VerdictClass = "INVALID", "invalid"
	}
	v.Title = fmt.Sprintf("%s — %s", v.Verdict, describe(m))
	v.Meta = metaRows(m)
	if res != nil {
		v.HarnessError = res.Error
		v.Checkers = checkerRows(res.Checkers)
	}
	v.Ops = countOps(run.Ops, res)
	v.Faults = countFaults(run, res)
	for _, b := range newTimeAxis(run).Bands {
		ev := b.Ev
		e := eventView{
			Kind:        ev.Kind,
			Color:       swatch(ev.Kind),
			Start:       fmt.Sprintf("%.3f", b.Start),
			End:         fmt.Sprintf("%.3f", b.End),
			Length:      fmt.Sprintf("%.3f", b.End-b.Start),
			Nodes:       joinInts(ev.Nodes),
			Description: ev.Description,
			Error:       ev.Error,
		}
		if b.ActiveAtEnd {
			e.End = "active at end"
		}
		v.Timeline = append(v.Timeline, e)
	}
	v.Plots = plots(run)
	for _, p := range v.Plots {
		// The SVG is generated by this package from numbers and escaped
		// strings (see inlineSVG), so it is trusted markup.
		v.SVGs = append(v.SVGs, template.HTML(p.SVG))
	}
	for _, name := range []string{history.HistoryFile, history.NemesisFile, history.ResultsFile,
		history.ReplicasFile, history.RunFile} {
		if l, ok := link(dir, name); ok {
			v.Files = append(v.Files, l)
		}
	}
	for _, name := range nodeLogs(dir) {
		if l, ok := link(dir, name); ok {
			v.NodeLogs = append(v.NodeLogs, l)
		}
	}
	if l, ok := link(dir, LinearizabilityFile); ok {
		v.Linearizability = l.Href
	}
	v.Replicas = run.Replicas
	return v
}

// runName names a run by its directory.
func runName(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Base(dir)
}

// describe is a one-line description of a run.
func describe(m history.Meta) string {
	parts := []string{orDash(m.Workload)}
	if len(m.Nemesis) > 0 {
		parts = append(parts, strings.Join(m.Nemesis, ","))
	} else {
		parts = append(parts, "no faults")
	}
	parts = append(parts, fmt.Sprintf("seed %d", m.Seed))
	if m.Mutant != "" {
		parts = append(parts, "mutant "+m.Mutant)
	}
	return strings.Join(parts, " · ")
}

// metaRows lists the run parameters.
func metaRows(m history.Meta) []kv {
	rows := []kv{
		{"workload", orDash(m.Workload)},
		{"nemesis", orDash(strings.Join(m.Nemesis, ", "))},
		{"seed", strconv.FormatInt(m.Seed, 10)},
		{"time limit", orDash(m.TimeLimit)},
		{"rate", strconv.FormatFloat(m.Rate, 'g', -1, 64) + " ops/s"},
		{"net mode", orDash(m.NetMode)},
	}
	if m.Mutant != "" {
		rows = append(rows, kv{"mutant", m.Mutant})
	}
	rows = append(rows,
		kv{"nodes", strconv.Itoa(m.Nodes)},
		kv{"queues", strconv.Itoa(m.Queues)},
		kv{"dedupe", strconv.FormatBool(m.Dedupe)},
		kv{"started", orDash(m.Started)},
		kv{"duration", seconds(m.Duration)},
	)
	if m.Healed > 0 {
		rows = append(rows, kv{"healed at", seconds(m.Healed)})
	}
	return rows
}

// checkerRows lists checkers, failing ones first, then by name.
func checkerRows(cs map[string]history.CheckerResult) []checkerView {
	rows := make([]checkerView, 0, len(cs))
	for name, c := range cs {
		r := checkerView{Name: name, Valid: c.Valid, Note: c.Note, Counts: sortedCounts(c.Counts)}
		r.Errors = c.Errors
		if len(r.Errors) > maxErrorsShown {
			r.Errors, r.MoreCount = r.Errors[:maxErrorsShown], len(c.Errors)-maxErrorsShown
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Valid != rows[j].Valid {
			return !rows[i].Valid
		}
		return rows[i].Name < rows[j].Name
	})
	return rows
}

// sortedCounts returns counts sorted by name.
func sortedCounts(m map[string]int64) []kv {
	out := make([]kv, 0, len(m))
	for k, n := range m {
		out = append(out, kv{k, strconv.FormatInt(n, 10)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// countOps tabulates operations. It counts the history itself; when the
// history is empty it falls back to the results' "kind.outcome" counts.
func countOps(ops []history.Op, res *history.Results) opTable {
	rows := map[string]*opRow{}
	add := func(kind, outcome string, n int64) {
		r := rows[kind]
		if r == nil {
			r = &opRow{Kind: kind}
			rows[kind] = r
		}
		switch history.Outcome(outcome) {
		case history.OK:
			r.OK += n
		case history.Fail:
			r.Fail += n
		case history.Info:
			r.Info += n
		default:
			r.Other += n
		}
		r.Total += n
	}
	if len(ops) > 0 {
		for _, op := range ops {
			add(string(op.Kind), string(op.Outcome), 1)
		}
	} else if res != nil {
		for key, n := range res.Ops {
			kind, outcome, _ := strings.Cut(key, ".")
			add(kind, outcome, n)
		}
	}
	var t opTable
	t.Total.Kind = "total"
	for _, r := range rows {
		t.Rows = append(t.Rows, *r)
		t.Total.OK += r.OK
		t.Total.Fail += r.Fail
		t.Total.Info += r.Info
		t.Total.Other += r.Other
		t.Total.Total += r.Total
	}
	sort.Slice(t.Rows, func(i, j int) bool {
		oi, oj := kindOrder(t.Rows[i].Kind), kindOrder(t.Rows[j].Kind)
		if oi != oj {
			return oi < oj
		}
		return t.Rows[i].Kind < t.Rows[j].Kind
	})
	return t
}

// kindOrder orders operation kinds as a workload runs them.
func kindOrder(k string) int {
	switch history.Kind(k) {
	case history.Send:
		return 0
	case history.Poll:
		return 1
	case history.Commit:
		return 2
	case history.Fetch:
		return 3
	}
	return 4
}

// countFaults summarises faults by kind from the nemesis log, or from the
// results when the log is empty.
func countFaults(run *history.Run, res *history.Results) []faultCount {
	byKind := map[string]*faultCount{}
	get := func(kind string) *faultCount {
		f := byKind[kind]
		if f == nil {
			f = &faultCount{Kind: kind, Color: swatch(kind)}
			byKind[kind] = f
		}
		return f
	}
	if len(run.Events) > 0 {
		secs := map[string]float64{}
		for _, b := range newTimeAxis(run).Bands {
			f := get(b.Kind)
			f.Count++
			if b.Ev.Error != "" {
				f.Errors++
			}
			secs[b.Kind] += b.End - b.Start
		}
		for k, s := range secs {
			byKind[k].Seconds = fmt.Sprintf("%.1f", s)
		}
	} else if res != nil {
		for k, n := range res.Faults {
			get(k).Count += n
		}
	}
	out := make([]faultCount, 0, len(byKind))
	for _, f := range byKind {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// swatch is the inline style of a fault kind's color swatch.
func swatch(kind string) template.CSS {
	return template.CSS("background-color:" + cssColor(kindColor(kind)))
}

// link returns a link to dir/name (name slash-separated) if it is a file.
func link(dir, name string) (fileLink, bool) {
	st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil || !st.Mode().IsRegular() {
		return fileLink{}, false
	}
	return fileLink{Name: name, Href: escapePath(name), Size: byteSize(st.Size())}, true
}

// nodeLogs lists the node logs of a run directory, slash-separated and
// relative to it, in node order (n2 before n10).
func nodeLogs(dir string) []string {
	matches, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(NodeLogPattern)))
	out := make([]string, 0, len(matches))
	for _, m := range matches {
		if rel, err := filepath.Rel(dir, m); err == nil {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i], out[j]) })
	return out
}

// naturalLess compares strings with runs of digits compared as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da != "" && db != "" {
			na, _ := strconv.ParseUint(da, 10, 64)
			nb, _ := strconv.ParseUint(db, 10, 64)
			if na != nb {
				return na < nb
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digitPrefix returns the leading ASCII digits of s.
func digitPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// escapePath percent-escapes a slash-separated relative path for an href.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = pathEscape(s)
	}
	return strings.Join(segs, "/")
}

// pathEscape percent-escapes every byte of one path segment but URL
// unreserved characters, so a name like "a:b" is not read as a scheme.
func pathEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// byteSize formats a file size.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// seconds formats a nanosecond duration as seconds.
func seconds(ns int64) string {
	return fmt.Sprintf("%.3f s", float64(ns)/nsPerSec)
}

// joinInts formats node numbers "1,2,3".
func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// orDash returns s, or "—" if it is empty.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// parseTemplate parses one of the package's templates with its helpers.
func parseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Funcs(template.FuncMap{
		"upper":  strings.ToUpper,
		"join":   strings.Join,
		"runURL": runURL,
	}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("report: template %s: %w", name, err)
	}
	return t, nil
}
