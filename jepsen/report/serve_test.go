package report

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
)

// runsRoot lays out a root of runs:
//
//	old/           valid, started 2025-01-01, no report.html
//	2025/new/      invalid (synthRun), started 2025-03-01, with report.html
//	2025/live/     no results.json, started 2025-02-01
//	a/b/c/         too deep to be listed
//	notes/         no run.json
func runsRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	mk := func(rel string) string {
		d := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	src, run, res := synthRun(t)
	if err := os.Rename(src, filepath.Join(mk("2025"), "new")); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(root, "2025", "new"), run, res); err != nil {
		t.Fatal(err)
	}
	old := &history.Run{Meta: history.Meta{Workload: "retries", Seed: 7, Started: "2025-01-01T00:00:00Z"},
		Ops: []history.Op{{Kind: history.Send, Outcome: history.OK}, {Kind: history.Send, Outcome: history.Fail}}}
	writeRunFiles(t, mk("old"), old, &history.Results{Valid: true,
		Checkers: map[string]history.CheckerResult{"queue-lost": {Valid: true}},
		Ops:      map[string]int64{"send.ok": 1, "send.fail": 1}})
	live := &history.Run{Meta: history.Meta{Workload: "queue", Seed: 9, Started: "2025-02-01T00:00:00Z"},
		Ops:    []history.Op{{Kind: history.Poll, Outcome: history.OK}, {Kind: history.Poll, Outcome: history.OK}, {Kind: history.Send, Outcome: history.Info}},
		Events: []history.Event{{Kind: "pause", Start: 1, End: 2}}}
	writeRunFiles(t, mk("2025/live"), live, nil)
	writeRunFiles(t, mk("a/b/c"), old, nil)
	mustWrite(t, filepath.Join(mk("notes"), "readme.txt"), "not a run")
	return root
}

func TestIndex(t *testing.T) {
	root := runsRoot(t)
	runs, err := Index(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.RelPath)
	}
	if strings.Join(got, " ") != "2025/new 2025/live old" {
		t.Fatalf("Index = %v, want [2025/new 2025/live old] (newest first, depth <= 2)", got)
	}
	n, live, old := runs[0], runs[1], runs[2]
	if n.Verdict != VerdictInvalid || !n.HasResults || !n.HasReport || n.Ops != 400 || n.Faults != 2 ||
		strings.Join(n.FailedCheckers, ",") != "linearizable" || n.Meta.Seed != 4242 {
		t.Errorf("new run summary wrong: %+v", n)
	}
	if live.Verdict != VerdictUnknown || live.HasResults || live.HasReport || live.Ops != 3 || live.Faults != 1 {
		t.Errorf("live run summary wrong: %+v", live)
	}
	if old.Verdict != VerdictValid || old.Ops != 2 || old.Meta.Workload != "retries" || old.Err != "" {
		t.Errorf("old run summary wrong: %+v", old)
	}
	if !n.Time.Equal(time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("start time %v", n.Time)
	}

	if _, err := Index(filepath.Join(root, "missing")); err == nil {
		t.Error("Index of a missing root succeeded")
	}
}

func TestIndexBrokenRun(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "x", history.RunFile), "{not json")
	runs, err := Index(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Err == "" || runs[0].Verdict != VerdictUnknown {
		t.Fatalf("broken run: %+v", runs)
	}
}

// get fetches a path from the test server without following redirects.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestHandler(t *testing.T) {
	root := runsRoot(t)
	// A secret outside root, and a symlink inside root pointing at it.
	secret := filepath.Join(t.TempDir(), "secret.txt")
	mustWrite(t, secret, "TOP SECRET")
	if err := os.Symlink(secret, filepath.Join(root, "old", "leak.txt")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(root, nil))
	defer srv.Close()

	code, body := get(t, srv, "/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	checkBalanced(t, body)
	for _, want := range []string{`href="runs/2025/new/"`, `href="runs/old/"`, `href="runs/2025/live/"`,
		">INVALID<", ">VALID<", ">UNKNOWN<", "4242", "retries", "linearizable"} {
		if !strings.Contains(body, want) {
			t.Errorf("index lacks %q", want)
		}
	}
	if strings.Contains(body, "a/b/c") || strings.Contains(body, "notes") {
		t.Error("index lists a non-run or too-deep directory")
	}
	if strings.Index(body, "runs/2025/new/") > strings.Index(body, "runs/old/") {
		t.Error("index is not newest first")
	}

	// The written report is the index of its run directory.
	want, err := os.ReadFile(filepath.Join(root, "2025", "new", history.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, srv, "/runs/2025/new/"); code != http.StatusOK || body != string(want) {
		t.Errorf("GET run dir = %d, report served: %v", code, body == string(want))
	}
	if code, _ := get(t, srv, "/runs/2025/new"); code != http.StatusMovedPermanently {
		t.Errorf("GET run dir without slash = %d, want redirect", code)
	}
	if code, body := get(t, srv, "/runs/2025/new/nodes/n10/broker.log"); code != http.StatusOK || body != "log of n10\n" {
		t.Errorf("GET node log = %d %q", code, body)
	}
	// Without report.html, the report is rendered on the fly.
	if code, body := get(t, srv, "/runs/2025/live/"); code != http.StatusOK || !strings.Contains(body, ">UNKNOWN<") ||
		!strings.Contains(body, "<svg") {
		t.Errorf("GET live run = %d, no rendered report", code)
	}
	if code, _ := get(t, srv, "/runs/nope/"); code != http.StatusNotFound {
		t.Errorf("GET missing run = %d, want 404", code)
	}

	for _, p := range []string{
		"/runs/../../etc/passwd",
		"/runs/%2e%2e/%2e%2e/etc/passwd",
		"/runs/..%2f..%2fetc%2fpasswd",
		"/runs/old/../../../etc/passwd",
		"/runs/..\\..\\etc\\passwd",
	} {
		code, body := get(t, srv, p)
		if code != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", p, code)
		}
		if strings.Contains(body, "root:") {
			t.Errorf("GET %s leaked /etc/passwd", p)
		}
	}
	if code, body := get(t, srv, "/runs/old/leak.txt"); code == http.StatusOK || strings.Contains(body, "TOP SECRET") {
		t.Errorf("symlink out of root served: %d %q", code, body)
	}
	if code, _ := get(t, srv, "/elsewhere"); code != http.StatusNotFound {
		t.Errorf("GET /elsewhere = %d, want 404", code)
	}
}

func TestServeShutdown(t *testing.T) {
	root := runsRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, root, nil) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "runs/old/") {
		t.Fatalf("GET / = %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return after ctx was done")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
		t.Error("server still answering after shutdown")
	}
}

func TestServeErrors(t *testing.T) {
	ctx := context.Background()
	if err := Serve(ctx, "127.0.0.1:0", filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("Serve of a missing root succeeded")
	}
	if err := Serve(ctx, "127.0.0.1:-1", t.TempDir(), nil); err == nil {
		t.Error("Serve on a bad address succeeded")
	}
}
