package report

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// Verdicts of a RunSummary.
const (
	VerdictValid   = "valid"
	VerdictInvalid = "invalid"
	// VerdictUnknown: the run has no (readable) results.json, for example
	// because it is still running or the harness crashed.
	VerdictUnknown = "unknown"
)

// maxIndexDepth is how deep under the root Index looks for runs.
const maxIndexDepth = 2

// shutdownTimeout bounds the graceful shutdown of Serve.
const shutdownTimeout = 5 * time.Second

// RunSummary is one run directory as the index lists it.
type RunSummary struct {
	// RelPath is the run directory relative to the root, slash-separated
	// ("." for the root itself).
	RelPath string
	Meta    history.Meta
	// Verdict is VerdictValid, VerdictInvalid or VerdictUnknown.
	Verdict string
	// HasResults: results.json exists and was read.
	HasResults bool
	// HasReport: report.html exists.
	HasReport bool
	// FailedCheckers names the checkers that found the history invalid.
	FailedCheckers []string
	// HarnessError is Results.Error.
	HarnessError string
	// Ops is the number of operations (from results.json when it counts
	// them, else the lines of history.jsonl).
	Ops int64
	// Faults is the number of faults (from results.json when it counts
	// them, else the lines of nemesis.jsonl).
	Faults int64
	// Time is when the run started (Meta.Started, or the modification time
	// of run.json when Started does not parse).
	Time time.Time
	// Err describes a file of the run that could not be read.
	Err string
}

// Index lists the runs under root: every directory at most two levels
// below root (or root itself) that holds run.json, newest first (ties by
// path). Hidden directories and symbolic links are skipped. A run whose
// files cannot be read is still listed, with Err set; Index fails only
// when root itself cannot be read.
func Index(root string) ([]RunSummary, error) {
	var out []RunSummary
	var visit func(rel string, depth int) error
	visit = func(rel string, depth int) error {
		dir := filepath.Join(root, filepath.FromSlash(rel))
		if isFile(filepath.Join(dir, history.RunFile)) {
			out = append(out, summarize(dir, rel))
		}
		if depth == maxIndexDepth {
			return nil
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			if depth == 0 {
				return fmt.Errorf("report: index: %w", err)
			}
			return nil // an unreadable subdirectory is not a run
		}
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				if err := visit(path.Join(rel, e.Name()), depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := visit(".", 0); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.After(out[j].Time)
		}
		return out[i].RelPath < out[j].RelPath
	})
	return out, nil
}

// summarize reads what the index shows of the run in dir.
func summarize(dir, rel string) RunSummary {
	s := RunSummary{RelPath: rel, Verdict: VerdictUnknown}
	var problems []string
	runFile := filepath.Join(dir, history.RunFile)
	if err := readJSON(runFile, &s.Meta); err != nil {
		problems = append(problems, err.Error())
	}
	s.Time = parseStarted(s.Meta.Started)
	if s.Time.IsZero() {
		if st, err := os.Stat(runFile); err == nil {
			s.Time = st.ModTime()
		}
	}
	opsKnown, faultsKnown := false, false
	var res history.Results
	switch err := readJSON(filepath.Join(dir, history.ResultsFile), &res); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		problems = append(problems, err.Error())
	default:
		s.HasResults = true
		s.Verdict = VerdictInvalid
		if res.Valid {
			s.Verdict = VerdictValid
		}
		s.HarnessError = res.Error
		for name, c := range res.Checkers {
			if !c.Valid {
				s.FailedCheckers = append(s.FailedCheckers, name)
			}
		}
		sort.Strings(s.FailedCheckers)
		for key, n := range res.Ops {
			if strings.Contains(key, ".") { // "kind.outcome"; skip any totals
				s.Ops += n
				opsKnown = true
			}
		}
		for _, n := range res.Faults {
			s.Faults += n
		}
		faultsKnown = len(res.Faults) > 0
	}
	if !opsKnown {
		s.Ops = countLines(filepath.Join(dir, history.HistoryFile))
	}
	if !faultsKnown {
		s.Faults = countLines(filepath.Join(dir, history.NemesisFile))
	}
	s.HasReport = isFile(filepath.Join(dir, history.ReportFile))
	s.Err = strings.Join(problems, "; ")
	return s
}

// parseStarted parses Meta.Started in the formats a harness may write.
func parseStarted(v string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", time.UnixDate} {
		if t, err := time.Parse(layout, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// readJSON decodes the JSON file at p into v. A missing file is an error
// wrapping fs.ErrNotExist.
func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("report: %s: %w", filepath.Base(p), err)
	}
	return nil
}

// countLines counts the non-empty lines of a file (0 if it cannot be read).
func countLines(p string) int64 {
	f, err := os.Open(p)
	if err != nil {
		return 0
	}
	defer f.Close()
	var n int64
	r := bufio.NewReaderSize(f, 64<<10)
	last := byte('\n')
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += int64(bytes.Count(buf[:k], []byte{'\n'}))
			last = buf[k-1]
		}
		if err != nil {
			break
		}
	}
	if last != '\n' {
		n++ // final line without a newline
	}
	return n
}

// isFile reports whether p is a regular file (following symbolic links).
func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// runURL is the link from the index page to a run directory.
func runURL(rel string) string {
	if rel == "." || rel == "" {
		return "runs/"
	}
	return "runs/" + escapePath(rel) + "/"
}

// Serve serves the runs under root on addr until ctx is done, then shuts
// down gracefully (waiting up to a few seconds for requests under way) and
// returns nil. It returns an error if root is not a directory, addr cannot
// be listened on, or the server fails. See Handler for what it serves.
func Serve(ctx context.Context, addr, root string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("report: serve: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("report: serve: %s is not a directory", root)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("report: serve: %w", err)
	}
	return serve(ctx, ln, root, logger)
}

// serve runs the server on ln until ctx is done.
func serve(ctx context.Context, ln net.Listener, root string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           Handler(root, logger),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("report server listening", "url", "http://"+ln.Addr().String()+"/", "root", root)
	select {
	case err := <-errc:
		return fmt.Errorf("report: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("report: shutdown: %w", err)
	}
	logger.Info("report server stopped")
	return nil
}

// Handler serves the runs under root:
//
//	GET /                 the index of runs (see Index)
//	GET /runs/<rel>/      the run's report.html; without one, a report
//	                      rendered on the fly if the directory is a run,
//	                      else a directory listing
//	GET /runs/<rel>/<f>   a file of the run directory
//
// Paths with ".." elements are refused (400), and files are opened through
// an os.Root, so nothing outside root is served, symbolic links included.
// A nil logger discards.
func Handler(root string, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &server{root: root, log: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /runs/", s.runs)
	return s.guard(mux)
}

// server holds what the handlers need.
type server struct {
	root string
	log  *slog.Logger
}

// guard refuses path traversal before the mux cleans (and redirects) the
// path, and logs every request.
func (s *server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if hasDotDot(r.URL.Path) || hasDotDot(r.URL.RawPath) ||
			strings.ContainsAny(r.URL.Path, "\\\x00") {
			http.Error(sw, "invalid path", http.StatusBadRequest)
		} else {
			next.ServeHTTP(sw, r)
		}
		s.log.Debug("http request", "method", r.Method, "path", r.URL.Path,
			"status", sw.status, "duration", time.Since(start))
	})
}

// hasDotDot reports whether a URL path has a ".." element.
func hasDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// index serves the list of runs.
func (s *server) index(w http.ResponseWriter, r *http.Request) {
	runs, err := Index(s.root)
	if err != nil {
		s.log.Warn("index runs", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	tmpl, err := parseTemplate("index", indexTemplate)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, struct {
		Root string
		Runs []RunSummary
	}{s.root, runs}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeHTML(w, buf.Bytes())
}

// runs serves the files of run directories.
func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/runs/"), "/")
	if name == "" {
		name = "."
	}
	if !fs.ValidPath(name) {
		http.Error(w, "invalid path", http.StatusBadRequest)
		return
	}
	rt, err := os.OpenRoot(s.root)
	if err != nil {
		http.Error(w, "runs root unavailable", http.StatusInternalServerError)
		return
	}
	defer rt.Close()
	fsys := rt.FS()
	st, err := fs.Stat(fsys, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if !st.IsDir() {
		http.StripPrefix("/runs", http.FileServerFS(fsys)).ServeHTTP(w, r)
		return
	}
	if !strings.HasSuffix(r.URL.Path, "/") {
		target := path.Base(r.URL.Path) + "/"
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return
	}
	report := path.Join(name, history.ReportFile)
	if st, err := fs.Stat(fsys, report); err == nil && st.Mode().IsRegular() {
		http.ServeFileFS(w, r, fsys, report)
		return
	}
	if st, err := fs.Stat(fsys, path.Join(name, history.RunFile)); err == nil && st.Mode().IsRegular() {
		s.renderRun(w, name)
		return
	}
	http.StripPrefix("/runs", http.FileServerFS(fsys)).ServeHTTP(w, r)
}

// renderRun renders the report of a run that has none on disk (a run in
// progress, or one whose harness died before writing it).
func (s *server) renderRun(w http.ResponseWriter, name string) {
	dir := filepath.Join(s.root, filepath.FromSlash(name))
	run, err := history.Load(dir)
	if err != nil {
		s.log.Warn("load run", "dir", dir, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var res *history.Results
	var r history.Results
	if err := readJSON(filepath.Join(dir, history.ResultsFile), &r); err == nil {
		res = &r
	}
	var buf bytes.Buffer
	if err := render(&buf, dir, run, res, time.Now()); err != nil {
		s.log.Warn("render run", "dir", dir, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeHTML(w, buf.Bytes())
}

// writeHTML writes a complete HTML page.
func writeHTML(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

// statusWriter records the status of a response for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader implements http.ResponseWriter.
func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// ReadFrom keeps the underlying writer's io.ReaderFrom (sendfile) fast path.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(w.ResponseWriter, r)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
