package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// docCmdsFullEnv, set to 1 (as .ci/run does), also runs the documented
// commands that take longer even in their short form: chaos runs, the
// failover benchmark, the benchmark scripts and go benchmarks.
const docCmdsFullEnv = "RAFTMQ_DOCCMDS_FULL"

// shortForm is how a documented command runs in the test: the values of
// flags (or, for a script, its environment settings) that make a long
// command short. Only flags the line gives are changed; env settings of a
// script replace the line's own.
type shortForm struct {
	cmd     string            // raftmq command path ("bench produce") or script ("./scripts/x.sh")
	flags   map[string]string // flag -> short value, where the line gives the flag
	env     map[string]string // for scripts
	full    bool              // only in the full run
	timeout time.Duration     // per command (0: docCmdTimeout)
}

// docCmdTimeout bounds one command that has no timeout of its own.
const docCmdTimeout = 90 * time.Second

var shortForms = []shortForm{
	{cmd: "bench produce", flags: map[string]string{"--duration": "1s"}},
	{cmd: "bench txn", flags: map[string]string{"--duration": "1s"}},
	{cmd: "bench limits", flags: map[string]string{"--duration": "200ms"}},
	{cmd: "bench delay", flags: map[string]string{"--messages": "300", "--delay": "1s"}},
	{cmd: "bench failover", flags: map[string]string{"--kills": "2"}, full: true, timeout: 3 * time.Minute},
	{cmd: "jepsen run", flags: map[string]string{"--time-limit": "8s"}, full: true, timeout: 3 * time.Minute},
	{cmd: "./scripts/queues-curve.sh", env: map[string]string{"DURATION": "1s", "POINTS": "4", "CONSUME": "0", "NATS": "0"},
		full: true, timeout: 3 * time.Minute},
	{cmd: "./scripts/backlog.sh", env: map[string]string{"SIZE": "16M", "TOPICS": "2", "QUEUES": "2", "DURATION": "1s", "CHUNK": "1s",
		"COLD": "0", "LOCK": ""}, full: true, timeout: 4 * time.Minute},
	{cmd: "./scripts/delay-backlog.sh", env: map[string]string{"MESSAGES": "2000", "DELAY": "8", "BASELINE": "1s", "SEND": "1s"},
		full: true, timeout: 3 * time.Minute},
	{cmd: "./scripts/limits.sh", env: map[string]string{"ROUNDS": "1", "PROBE": "200ms", "DURATION": "1s", "LOCK": ""},
		full: true, timeout: 3 * time.Minute},
	{cmd: "./scripts/ab.sh", env: map[string]string{"ROUNDS": "1", "DURATION": "1s", "LOCK": ""}, full: true, timeout: 3 * time.Minute},
	{cmd: "./scripts/cluster.sh"},
	{cmd: "go build"},
	{cmd: "go test", flags: map[string]string{"-benchtime": "1x"}, full: true, timeout: 5 * time.Minute},
}

// shortFormOf finds the entry for a command path or script.
func shortFormOf(cmd string) (shortForm, bool) {
	for _, s := range shortForms {
		if cmd == s.cmd || strings.HasPrefix(cmd, s.cmd+" ") {
			return s, true
		}
	}
	return shortForm{}, false
}

// shellTools are the other programs the docs' shell blocks run; their
// lines run under bash as written (addresses rewritten).
var shellTools = map[string]bool{"openssl": true, "printf": true, "chmod": true, "curl": true}

// placeholderRE matches a placeholder such as <msgId>.
var placeholderRE = regexp.MustCompile(`<[A-Za-z][A-Za-z0-9]*>`)

// addrEnv is the variable whose value is --addr's default (envAddrs).
const addrEnv = "RAFTMQ_ADDR"

// oldBinaryPlaceholder is the baseline binary of an A/B comparison; the
// test gives its own build.
const oldBinaryPlaceholder = "/path/to/old/raftmq"

// sentRE reads a produce command's output line.
var sentRE = regexp.MustCompile(`msgId ([0-9A-F]+) offsetMsgId ([0-9A-F]+)`)

// server is a long-running command a block started: stopped at the
// block's end as Ctrl-C would stop it.
type server struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	line string     // the command as run
	done chan error // its Wait
}

// start starts a server's command in its own process group, killed with
// everything it started when the test ends.
func startServer(t *testing.T, dir, program string, args, env []string) (*server, error) {
	s := &server{out: &syncBuffer{}, done: make(chan error, 1),
		line: strings.Join(append([]string{filepath.Base(program)}, args...), " ")}
	s.cmd = exec.Command(program, args...)
	s.cmd.Dir, s.cmd.Env, s.cmd.Stdout, s.cmd.Stderr = dir, env, s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) })
	go func() { s.done <- s.cmd.Wait() }()
	return s, nil
}

// stop interrupts the server as Ctrl-C would and requires a clean exit.
func (s *server) stop() error {
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("%s: interrupt: %w", s.line, err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("%s: after Ctrl-C: %v\n%s", s.line, err, tail(s.out.String(), 30))
		}
		return nil
	case <-time.After(time.Minute):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		return fmt.Errorf("%s: did not stop within 1 min of Ctrl-C\n%s", s.line, tail(s.out.String(), 30))
	}
}

// docGroup is a `raftmq cluster` the docs' commands run against.
type docGroup struct {
	*server
	base, namesrv int
}

// addrs maps the addresses the docs write (the local group's defaults) to
// this group's.
func (g *docGroup) addrs() map[string]string {
	m := map[string]string{}
	for i := 0; i < 3; i++ {
		m[fmt.Sprintf("127.0.0.1:%d", 10911+i)] = fmt.Sprintf("127.0.0.1:%d", g.base+i)
		m[fmt.Sprintf("127.0.0.1:%d", 10931+i)] = fmt.Sprintf("127.0.0.1:%d", g.base+20+i)
		m[fmt.Sprintf("127.0.0.1:%d", 10941+i)] = fmt.Sprintf("127.0.0.1:%d", g.base+30+i) // gRPC
	}
	if g.namesrv != 0 {
		m["127.0.0.1:9876"] = fmt.Sprintf("127.0.0.1:%d", g.namesrv)
	}
	return m
}

func (g *docGroup) clientAddrs() string {
	return fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", g.base, g.base+1, g.base+2)
}

// docRun is the state of one run over the docs.
type docRun struct {
	t       *testing.T
	root    string // the repository
	bin     string // the raftmq binary the test built
	binDir  string // holds raftmq, first on PATH
	full    bool
	shared  *docGroup
	lastMsg map[string]string // placeholder -> value, from the last produce
	ran     int
	skipped map[string]int // reason -> lines
	later   int            // lines left to the full run
}

// freePort finds a free TCP port on the loopback address.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// scratch makes a working directory for a block: the repository's entries
// linked into a fresh directory, so that ./scripts, ./cmd and go.mod are
// there as in a clone while whatever the commands write stays in it.
func (r *docRun) scratch() string {
	dir := r.t.TempDir()
	ents, err := os.ReadDir(r.root)
	require.NoError(r.t, err)
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasPrefix(name, "."), name == "raftmq", name == "raftmq-mutant", strings.HasSuffix(name, "-data"),
			name == "runs", name == "jepsen-runs", name == "bench-results", name == "ci-jepsen", name == "tls":
		default:
			require.NoError(r.t, os.Symlink(filepath.Join(r.root, name), filepath.Join(dir, name)))
		}
	}
	require.NoError(r.t, os.Symlink(r.bin, filepath.Join(dir, "raftmq")))
	return dir
}

// env is the environment of a documented command.
func (r *docRun) env(g *docGroup, extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "RAFTMQ_TEST_MAIN" || k == addrEnv || k == "PATH" || k == "GOFLAGS" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+r.binDir+string(os.PathListSeparator)+filepath.Dir(goTool(r.t))+string(os.PathListSeparator)+os.Getenv("PATH"),
		addrEnv+"="+g.clientAddrs(), "GOFLAGS=-trimpath")
	return append(env, extra...)
}

// startGroup runs `raftmq cluster` with args (the doc's, or the test's
// own) on free ports in dir and waits until it watches its nodes.
func (r *docRun) startGroup(dir string, program string, args []string, env []string) (*docGroup, error) {
	groups := 1
	for i, a := range args {
		if a == "--groups" && i+1 < len(args) {
			groups, _ = strconv.Atoi(args[i+1])
		}
	}
	var extra []int
	for g := 1; g < groups; g++ {
		for _, off := range []int{0, 1, 2, 10, 11, 12, 20, 21, 22} {
			extra = append(extra, 100*g+off)
		}
	}
	// freeBasePort's ports are free when it looks, not necessarily when
	// the nodes bind them (an ephemeral port of any connection on the
	// machine may take one meanwhile): a group refused a busy port starts
	// again on others.
	var lastErr error
	for attempt := 0; attempt < 4; attempt++ {
		g, err := r.tryGroup(dir, program, args, env, groups, extra, attempt)
		if err == nil {
			return g, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "is in use") {
			break
		}
		r.t.Logf("%v; again on other ports", err)
	}
	return nil, lastErr
}

// tryGroup starts a group on ports found from a start that moves with
// attempt.
func (r *docRun) tryGroup(dir, program string, args, env []string, groups int, extra []int, attempt int) (*docGroup, error) {
	g := &docGroup{base: docBasePort(r.t, attempt, extra...)}
	args = append(append([]string(nil), args...), "--base-port", strconv.Itoa(g.base))
	if groups > 1 {
		g.namesrv = freePort(r.t)
		args = append(args, "--namesrv-port", strconv.Itoa(g.namesrv))
	}
	srv, err := startServer(r.t, dir, program, args, env)
	if err != nil {
		return nil, err
	}
	g.server = srv
	began := time.Now()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(g.out.String(), "watching; Ctrl-C stops all nodes") {
		select {
		case err := <-g.done:
			return nil, fmt.Errorf("%s exited before its group was up (%v):\n%s", g.line, err, g.out.String())
		case <-deadline:
			_ = g.stop()
			return nil, fmt.Errorf("%s: no group within 2 min:\n%s", g.line, g.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.t.Logf("group up in %s: %s", time.Since(began).Round(100*time.Millisecond), g.line)
	return g, nil
}

// docBasePort is freeBasePort searching from a start that moves with
// attempt, so that a retry does not land on the same ports.
func docBasePort(t *testing.T, attempt int, extra ...int) int {
	offs := append([]int{0, 1, 2, 10, 11, 12, 20, 21, 22}, extra...)
	start := 20000 + (os.Getpid()%2000*10+attempt*4099)%30000
	for base := start; base < 60000; base += 97 {
		free := true
		for _, off := range offs {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+off)))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free ports")
	return 0
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(s, "\r", "\n"), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lineKind classifies a command line: raftmq, script, go or tool; "" for
// a line the test does not know how to run.
func lineKind(words []string) string {
	if len(words) == 0 {
		return ""
	}
	switch w := words[0]; {
	case w == "./raftmq" || w == "raftmq":
		return "raftmq"
	case strings.HasPrefix(w, "./scripts/") && strings.HasSuffix(w, ".sh"):
		return "script"
	case w == "go" && len(words) > 1 && (words[1] == "build" || words[1] == "test"):
		return "go"
	case shellTools[w]:
		return "tool"
	}
	return ""
}

// commandPath is the raftmq command a line names ("bench produce") and
// whether its flags parse, checked against the CLI itself.
func commandPath(args []string) (string, error) {
	cmd, rest, err := newRoot().Find(args)
	if err != nil {
		return "", err
	}
	if !cmd.Runnable() || cmd.Annotations[annotationGroupOnly] != "" {
		return "", fmt.Errorf("%q is not a command that runs", cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return "", err
	}
	return strings.TrimPrefix(cmd.CommandPath(), "raftmq "), nil
}

// applyShort replaces the values of the flags a short form names.
func applyShort(args []string, sf shortForm) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if v, ok := sf.flags[a]; ok && i+1 < len(out) {
			out[i+1] = v
		}
		if k, _, ok := strings.Cut(a, "="); ok {
			if v, ok := sf.flags[k]; ok {
				out[i] = k + "=" + v
			}
		}
	}
	return out
}

// rewriteAddrs points the docs' default addresses at the group's.
func rewriteAddrs(s string, m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s = strings.ReplaceAll(s, k, m[k])
	}
	return s
}

// runBlock runs one shell block's lines in a fresh directory, against the
// shared group or the block's own.
func (r *docRun) runBlock(b docBlock) {
	t := r.t
	where := fmt.Sprintf("%s:%d", strings.TrimPrefix(b.file, "../../"), b.line)
	dir := r.scratch()
	g := r.shared
	var servers []*server
	defer func() {
		for i := len(servers) - 1; i >= 0; i-- {
			if err := servers[i].stop(); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}()
	for _, m := range b.marks {
		if m.kind != "cluster" {
			continue
		}
		own, err := r.startGroup(dir, r.bin, append([]string{"cluster", "--demo", "0"}, strings.Fields(m.reason)...), r.env(r.shared, nil))
		if err != nil {
			t.Errorf("%s: the block's group (doccheck: cluster %s): %v", where, m.reason, err)
			return
		}
		servers = append(servers, own.server)
		g = own
	}
	deferred := false // a line was left to the full run: so are the block's next ones
	for _, l := range b.lines {
		at := fmt.Sprintf("%s:%d", strings.TrimPrefix(b.file, "../../"), l.line)
		if m, ok := b.lineMark(l, "skip"); ok {
			r.skipped[m.reason]++
			t.Logf("%s: skipped (%s): %s", at, m.reason, l.text)
			continue
		}
		if deferred {
			r.later++
			t.Logf("%s: left to the full run with the line before it: %s", at, l.text)
			continue
		}
		xfail, expectFail := b.lineMark(l, "xfail")
		words := shellWords(l.text)
		var assigns []string
		for len(words) > 0 && isAssignment(words[0]) {
			assigns = append(assigns, strings.ReplaceAll(words[0], oldBinaryPlaceholder, r.bin))
			words = words[1:]
		}
		kind := lineKind(words)
		if kind == "" {
			t.Errorf("%s: cannot classify %q: the test runs raftmq, ./scripts/*.sh, go build|test and %v; mark the line <!-- doccheck: skip `PREFIX` REASON -->", at, l.text, sortedKeys(shellTools))
			continue
		}
		if strings.Contains(l.text, "...") {
			t.Errorf("%s: %q is an excerpt (...), which cannot run: mark it skip", at, l.text)
			continue
		}
		var program string
		var args []string
		var sf shortForm
		var hasShort bool
		var settings []string // a script's short settings, for the log
		env := r.env(g, assigns)
		switch kind {
		case "raftmq":
			args = words[1:]
			for i, a := range args {
				if ph := placeholderRE.FindString(a); ph != "" {
					v, ok := r.lastMsg[ph]
					if !ok {
						t.Errorf("%s: placeholder %s: the test fills only <msgId> and <offsetMsgId>, from the output of a raftmq produce before it", at, ph)
						args = nil
						break
					}
					args[i] = strings.ReplaceAll(a, ph, v)
				}
				args[i] = rewriteAddrs(args[i], g.addrs())
			}
			if args == nil {
				continue
			}
			path, err := commandPath(args)
			if err != nil {
				t.Errorf("%s: raftmq %s: %v", at, strings.Join(words[1:], " "), err)
				continue
			}
			sf, hasShort = shortFormOf(path)
			program = r.bin
			switch path {
			case "cluster":
				own, err := r.startGroup(dir, program, args, env)
				if err != nil {
					t.Errorf("%s: %v", at, err)
					return
				}
				r.ran++
				t.Logf("%s: started: %s", at, own.line)
				servers = append(servers, own.server)
				g = own
				continue
			case "jepsen serve":
				port := freePort(t)
				args = append(args, "--addr", fmt.Sprintf("127.0.0.1:%d", port))
				srv, err := startHTTPServer(t, dir, program, args, env, fmt.Sprintf("http://127.0.0.1:%d/", port))
				if err != nil {
					t.Errorf("%s: %v", at, err)
					continue
				}
				r.ran++
				t.Logf("%s: started: %s", at, srv.line)
				servers = append(servers, srv)
				continue
			case "bench failover", "jepsen run", "jepsen campaign", "jepsen selftest":
				args = append(args, "--base-port", strconv.Itoa(freeBasePort(t)))
			}
		case "script":
			program = filepath.Join(dir, words[0])
			args = words[1:]
			if _, err := os.Stat(program); err != nil {
				t.Errorf("%s: %s: %v", at, words[0], err)
				continue
			}
			sf, hasShort = shortFormOf(words[0])
			if !hasShort {
				t.Errorf("%s: %s has no short form in the test's table (shortForms): add one, or mark the line skip with the reason", at, words[0])
				continue
			}
			for k, v := range sf.env {
				env = append(env, k+"="+v)
				settings = append(settings, k+"="+v)
			}
			sort.Strings(settings)
			if words[0] == "./scripts/cluster.sh" {
				own, err := r.startGroup(dir, program, args, env)
				if err != nil {
					t.Errorf("%s: %v", at, err)
					return
				}
				r.ran++
				t.Logf("%s: started: %s", at, own.line)
				servers = append(servers, own.server)
				g = own
				continue
			}
			if sf.env != nil {
				// Every script with settings takes its group's ports from
				// BASE_PORT.
				port := "BASE_PORT=" + strconv.Itoa(freeBasePort(t))
				env = append(env, port)
				settings = append(settings, port)
			}
		case "go":
			sf, hasShort = shortFormOf("go " + words[1])
			program, args = goTool(t), words[1:]
		case "tool":
			program, args = "bash", []string{"-c", rewriteAddrs(l.text, g.addrs())}
		}
		if hasShort {
			if sf.full && !r.full {
				r.later++
				deferred = true
				t.Logf("%s: left to the full run (%s=1): %s", at, docCmdsFullEnv, l.text)
				continue
			}
			if kind != "tool" {
				args = applyShort(args, sf)
			}
		}
		timeout := docCmdTimeout
		if sf.timeout > 0 {
			timeout = sf.timeout
		}
		if l.background {
			t.Errorf("%s: %q runs in the background: the test knows how to wait for raftmq cluster and jepsen serve only", at, l.text)
			continue
		}
		began := time.Now()
		out, err := r.exec(dir, program, args, env, timeout)
		took := time.Since(began).Round(100 * time.Millisecond)
		r.ran++
		shown := strings.Join(append(append(settings, filepath.Base(program)), args...), " ")
		switch {
		case expectFail && err == nil:
			t.Errorf("%s: %s\nis marked xfail (%s) but succeeds now: remove the mark", at, shown, xfail.reason)
		case expectFail:
			r.skipped["expected to fail: "+xfail.reason]++
			t.Logf("%s: fails as marked (%s): %v", at, xfail.reason, err)
		case err != nil:
			t.Errorf("%s: %s\n%v\n%s", at, shown, err, tail(out, 30))
		default:
			t.Logf("%s: ok in %s: %s", at, took, shown)
		}
		if kind == "raftmq" && len(args) > 0 && args[0] == "produce" {
			if m := sentRE.FindAllStringSubmatch(out, -1); len(m) > 0 {
				last := m[len(m)-1]
				r.lastMsg = map[string]string{"<msgId>": last[1], "<offsetMsgId>": last[2]}
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// startHTTPServer runs a command that serves until interrupted and waits
// until url answers.
func startHTTPServer(t *testing.T, dir, program string, args, env []string, url string) (*server, error) {
	s, err := startServer(t, dir, program, args, env)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("%s exited (%v):\n%s", s.line, err, s.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.stop()
			return nil, fmt.Errorf("%s: %s did not answer within 30 s:\n%s", s.line, url, s.out.String())
		}
	}
}

// exec runs a command to its end, in its own process group (killed with
// everything it started when the timeout passes), and returns its output.
func (r *docRun) exec(dir, program string, args, env []string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	c := exec.CommandContext(ctx, program, args...)
	c.Dir, c.Env, c.Stdout, c.Stderr = dir, env, &out, &out
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	err := c.Run()
	if c.Process != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL) // whatever it left behind
	}
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("did not finish within %s", timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), fmt.Errorf("exit status %d", ee.ExitCode())
	}
	return out.String(), err
}

// classify checks a block without running it: whether the test knows
// what to do with it. It returns "run" for a shell block, "data" for one
// that holds no commands, "skip" for a block marked skip as a whole.
func classify(b docBlock) (string, error) {
	for _, m := range b.marks {
		if m.kind == "skip" && m.prefix == "" {
			return "skip", nil
		}
	}
	switch {
	case shellLangs[b.lang]:
		return "run", nil
	case dataLangs[b.lang]:
		for _, m := range b.marks {
			return "", fmt.Errorf("a %s block holds no commands: its doccheck mark (line %d) means nothing", b.lang, m.line)
		}
		return "data", nil
	case b.lang == "":
		return "", errors.New("a fenced block without a language: write ```sh for commands, ```text for output or listings")
	}
	return "", fmt.Errorf("a ```%s block: the test knows %v (commands) and %v (no commands)", b.lang, sortedKeys(shellLangs), sortedKeys(dataLangs))
}

// TestDocCommands runs every command of the shell blocks of the README
// and docs/ against real groups: a three-node `raftmq cluster` the test
// starts and shares, or the block's own where the block starts one. The
// docs' default addresses are rewritten to the group's (RAFTMQ_ADDR for
// the client commands), long commands run in their short form
// (shortForms), and a block or line marked skip in the doc is counted with
// its reason. See docs/testing.md.
func TestDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	start := time.Now()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	r := &docRun{t: t, root: root, full: os.Getenv(docCmdsFullEnv) == "1", skipped: map[string]int{}}
	files, err := docFiles()
	require.NoError(t, err)
	var blocks []docBlock
	kinds := map[string]int{}
	for _, f := range files {
		bs, err := parseDocBlocks(f)
		require.NoError(t, err)
		for _, b := range bs {
			kind, err := classify(b)
			if err != nil {
				t.Errorf("%s:%d: %v", strings.TrimPrefix(b.file, "../../"), b.line, err)
				continue
			}
			kinds[kind]++
			switch kind {
			case "run":
				blocks = append(blocks, b)
			case "skip":
				for _, m := range b.marks {
					if m.kind == "skip" && m.prefix == "" {
						r.skipped[m.reason] += len(b.lines)
					}
				}
			}
		}
	}
	require.Greater(t, kinds["run"], 8, "too few shell blocks found: the scan is broken")
	if t.Failed() {
		return
	}

	r.binDir = t.TempDir()
	r.bin = filepath.Join(r.binDir, "raftmq")
	// -trimpath, here and (GOFLAGS) in the docs' builds: the blocks'
	// directories are other paths to the same files, and without it the
	// build cache would compile everything again for each.
	out, err := exec.Command(goTool(t), "build", "-trimpath", "-o", r.bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	built := time.Since(start)

	sharedDir := t.TempDir()
	r.shared, err = r.startGroup(sharedDir, r.bin, []string{"cluster", "--demo", "0", "--data", filepath.Join(sharedDir, "data")}, os.Environ())
	require.NoError(t, err)
	defer func() {
		if err := r.shared.stop(); err != nil {
			t.Error(err)
		}
	}()
	for _, b := range blocks {
		r.runBlock(b)
	}
	var reasons []string
	total := 0
	for reason, n := range r.skipped {
		reasons = append(reasons, fmt.Sprintf("  %d: %s", n, reason))
		total += n
	}
	sort.Strings(reasons)
	t.Logf("%d shell blocks (%d more marked skip as a whole, %d of code, config or output); %d commands run, %d not run or expected to fail:\n%s",
		kinds["run"], kinds["skip"], kinds["data"], r.ran, total, strings.Join(reasons, "\n"))
	if r.later > 0 {
		t.Logf("%d commands left to the full run (%s=1)", r.later, docCmdsFullEnv)
	}
	t.Logf("built in %s, ran in %s", built.Round(time.Second), time.Since(start).Round(time.Second))
}
