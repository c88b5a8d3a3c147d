//go:build linux

package netfault

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// noNamespaceReason explains proxy mode when Reexec was never called.
const noNamespaceReason = "not re-executed into a network namespace (call Reexec first)"

// envReportFD names the file descriptor on which a child started by Reexec
// reports whether it could prepare its namespace: "ok" or "fail: <why>".
const envReportFD = "RAFTMQ_NETNS_REPORT_FD"

// exitSetupFailed is the exit code of a child that could not prepare its
// namespace; the parent reads the report, not the code.
const exitSetupFailed = 125

// reportWait bounds how long the parent waits for a report after the child
// exited (the report is written before the child does anything else).
const reportWait = time.Second

// Reexec runs the current command again inside a private network namespace.
// Call it early, before the command has side effects; args is the full
// argument vector (os.Args when nil).
//
// Outside a namespace, with requested Auto or NetNS, Reexec starts
// /proc/self/exe with args and EnvVar=1 in a new network namespace
// (CLONE_NEWNET as root; CLONE_NEWUSER|CLONE_NEWNET with uid and gid 0
// mapped to the caller's otherwise, also tried by root when the first fails).
// It wires stdin, stdout and stderr, forwards SIGINT and SIGTERM, waits, and
// returns handled=true with the child's exit code (128+signal when the child
// was killed). The caller must exit with that code. The child gets SIGTERM
// if the parent dies.
//
// If no namespace can be created or prepared, Reexec returns an error for
// NetNS. For Auto it runs the command in a child in the host namespace
// instead, with EnvVar set to "proxy: <why>", so that [Enter] there reports
// proxy mode and the reason; it still returns handled=true.
//
// Inside a child it started (EnvVar=1), Reexec brings the loopback interface
// up, checks that nf_tables is usable, reports to the parent and returns
// handled=false, so the command goes on. If the preparation fails it returns
// handled=true and the caller exits; the parent falls back as above.
// With requested Proxy, or after a fallback, it returns handled=false.
func Reexec(requested string, args []string) (handled bool, exitCode int, err error) {
	if len(args) == 0 {
		args = os.Args
	}
	r := reexecer{
		exe:      "/proc/self/exe",
		args:     args,
		stdin:    os.Stdin,
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		attempts: namespaceAttempts(),
	}
	return r.reexec(requested)
}

// nsAttempt is one way of creating the namespace.
type nsAttempt struct {
	// name says which way, for error messages: "root" or "rootless".
	name string
	// attr returns fresh process attributes creating the namespace.
	attr func() *syscall.SysProcAttr
}

// namespaceAttempts lists the ways to create a namespace, best first.
func namespaceAttempts() []nsAttempt {
	rootless := nsAttempt{name: "rootless user+net namespace", attr: func() *syscall.SysProcAttr {
		return &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
	}}
	if os.Geteuid() != 0 {
		return []nsAttempt{rootless}
	}
	root := nsAttempt{name: "root net namespace", attr: func() *syscall.SysProcAttr {
		return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	}}
	return []nsAttempt{root, rootless}
}

// reexecer holds what Reexec needs, so tests can substitute the executable,
// the standard streams and the namespace attempts.
type reexecer struct {
	exe      string
	args     []string
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
	attempts []nsAttempt
	// env is the child's base environment; nil means os.Environ().
	env []string
}

// reexec implements Reexec.
func (r reexecer) reexec(requested string) (bool, int, error) {
	if err := checkRequested(requested); err != nil {
		return false, 0, err
	}
	switch v := os.Getenv(EnvVar); {
	case v == envInside:
		return insideChild()
	case v != "":
		if _, ok := proxyReasonFromEnv(v); !ok {
			return false, 0, fmt.Errorf("netfault: invalid %s value %q", EnvVar, v)
		}
		return false, 0, nil
	}
	if requested == Proxy {
		return false, 0, nil
	}
	var why []string
	for _, a := range r.attempts {
		code, nsErr, err := r.run(a.attr(), EnvVar+"="+envInside, true)
		if err != nil {
			return false, 0, err
		}
		if nsErr == nil {
			return true, code, nil
		}
		why = append(why, fmt.Sprintf("%s: %v", a.name, nsErr))
	}
	reason := strings.Join(why, "; ")
	if reason == "" {
		reason = "no way to create a namespace"
	}
	if requested == NetNS {
		return false, 0, fmt.Errorf("netfault: network namespace requested but unavailable: %s", reason)
	}
	code, _, err := r.run(&syscall.SysProcAttr{}, EnvVar+"="+envProxyPrefix+reason, false)
	if err != nil {
		return false, 0, err
	}
	return true, code, nil
}

// run starts the command as a child with the given attributes and extra
// environment variable, forwards signals and waits for it. With report set,
// the child gets a pipe on which it reports its namespace preparation.
//
// It returns nsErr when the namespace could not be created or prepared (the
// child's exit code is then meaningless) and err for any other failure.
func (r reexecer) run(sys *syscall.SysProcAttr, envKV string, report bool) (code int, nsErr, err error) {
	env := r.env
	if env == nil {
		env = os.Environ()
	}
	env = append(withoutEnv(env, EnvVar, envReportFD), envKV)
	sys.Pdeathsig = syscall.SIGTERM
	cmd := &exec.Cmd{
		Path:        r.exe,
		Args:        r.args,
		Env:         env,
		Stdin:       r.stdin,
		Stdout:      r.stdout,
		Stderr:      r.stderr,
		SysProcAttr: sys,
	}
	var rd, wr *os.File
	if report {
		if rd, wr, err = os.Pipe(); err != nil {
			return 0, nil, fmt.Errorf("netfault: report pipe: %w", err)
		}
		cmd.ExtraFiles = []*os.File{wr}
		cmd.Env = append(cmd.Env, envReportFD+"=3")
	}

	// Pdeathsig fires when the thread that started the child exits; keep
	// this goroutine on its thread until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)

	if err := cmd.Start(); err != nil {
		if report {
			rd.Close()
			wr.Close()
		}
		var pe *os.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, os.ErrNotExist) {
			return 0, nil, fmt.Errorf("netfault: start %s: %w", r.exe, err)
		}
		return 0, err, nil
	}
	reportc := make(chan string, 1)
	if report {
		wr.Close()
		go func() {
			b, _ := io.ReadAll(io.LimitReader(rd, 4096))
			reportc <- string(b)
		}()
	}
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	var waitErr error
wait:
	for {
		select {
		case s := <-sigc:
			_ = cmd.Process.Signal(s)
		case waitErr = <-waitc:
			break wait
		}
	}
	if report {
		var msg string
		select {
		case msg = <-reportc:
		case <-time.After(reportWait):
		}
		rd.Close()
		if why, failed := strings.CutPrefix(strings.TrimSpace(msg), "fail: "); failed {
			return 0, errors.New(why), nil
		}
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return 0, nil, fmt.Errorf("netfault: wait for child: %w", waitErr)
	}
	return exitCode(cmd.ProcessState), nil, nil
}

// exitCode maps a child's end to a shell-style exit code.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// withoutEnv returns env without the named variables.
func withoutEnv(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// insideChild is Reexec in a child started inside a namespace: prepare it
// and tell the parent how that went.
func insideChild() (bool, int, error) {
	var report *os.File
	if s := os.Getenv(envReportFD); s != "" {
		// Unset it so that processes this one starts do not write to an
		// unrelated descriptor 3.
		os.Unsetenv(envReportFD)
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return false, 0, fmt.Errorf("netfault: invalid %s value %q", envReportFD, s)
		}
		syscall.CloseOnExec(fd)
		report = os.NewFile(uintptr(fd), "netfault-report")
	}
	setupErr := setupNamespace()
	if report == nil {
		if setupErr != nil {
			return false, 0, fmt.Errorf("netfault: prepare network namespace: %w", setupErr)
		}
		return false, 0, nil
	}
	msg := "ok\n"
	if setupErr != nil {
		msg = "fail: " + strings.ReplaceAll(setupErr.Error(), "\n", " ") + "\n"
	}
	_, werr := report.WriteString(msg)
	report.Close()
	if setupErr != nil {
		return true, exitSetupFailed, nil
	}
	if werr != nil {
		return false, 0, fmt.Errorf("netfault: report to parent: %w", werr)
	}
	return false, 0, nil
}

// setupNamespace prepares a fresh network namespace: loopback up, nf_tables
// reachable. It is idempotent.
func setupNamespace() error {
	if err := linkUp("lo"); err != nil {
		return err
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	if _, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil {
		return fmt.Errorf("nftables: list tables: %w", err)
	}
	return nil
}

// linkUp sets IFF_UP on the named interface with SIOCGIFFLAGS/SIOCSIFFLAGS.
func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring %s up: socket: %w", name, err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring %s up: get flags: %w", name, err)
	}
	flags := ifr.Uint16()
	if flags&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(flags | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring %s up: set flags: %w", name, err)
	}
	return nil
}

// inUserNamespace reports whether the process runs in a user namespace other
// than the initial one, whose uid map is the identity over all uids.
func inUserNamespace() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return !(len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295")
}
