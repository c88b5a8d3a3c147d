//go:build linux

package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
)

// Environment of the test subprocesses.
const (
	// envTestChild names the test a subprocess must run; the test skips
	// itself anywhere else.
	envTestChild = "NETFAULT_TEST_CHILD"
	// envParentNetNS carries the parent's network namespace, to compare.
	envParentNetNS = "NETFAULT_TEST_PARENT_NETNS"
	// envExpectRootless makes TestReexecChild require a rootless namespace.
	envExpectRootless = "NETFAULT_TEST_EXPECT_ROOTLESS"
)

// childExitCode is the code TestReexecChild exits with when it passes, so
// that the parent sees the exit code pass through Reexec.
const childExitCode = 7

// nobody is the unprivileged uid and gid of the rootless test.
const nobody = 65534

// skipUnlessChild skips a test that only runs in a subprocess.
func skipUnlessChild(t *testing.T) {
	if os.Getenv(envTestChild) != t.Name() {
		t.Skip("runs only in a subprocess started by another test")
	}
}

// netnsID identifies the current network namespace.
func netnsID(t *testing.T) string {
	id, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// testArgs returns the arguments that run one test of this binary.
func testArgs(name string) []string {
	return []string{os.Args[0], "-test.run=^" + name + "$", "-test.v", "-test.count=1"}
}

// runInNamespace runs the named test in a subprocess inside a new network
// namespace (as root, CLONE_NEWNET; otherwise a user+net namespace) and fails
// if it fails. It skips when no namespace can be created.
func runInNamespace(t *testing.T, name string) {
	var why []string
	for _, a := range namespaceAttempts() {
		args := testArgs(name)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(withoutEnv(os.Environ(), EnvVar, envReportFD, envTestChild), envTestChild+"="+name, EnvVar+"="+envInside)
		cmd.SysProcAttr = a.attr()
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		out, err := cmd.CombinedOutput()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			why = append(why, fmt.Sprintf("%s: %v", a.name, err))
			continue
		}
		t.Logf("subprocess in a %s:\n%s", a.name, out)
		if err != nil {
			t.Fatalf("subprocess: %v", err)
		}
		if !bytes.Contains(out, []byte("--- PASS: "+name)) {
			t.Fatalf("subprocess did not pass %s", name)
		}
		return
	}
	t.Skipf("network namespaces are not allowed here: %s", strings.Join(why, "; "))
}

func TestNFTPartitionInNamespace(t *testing.T) {
	runInNamespace(t, "TestNFTPartitionChild")
}

// TestNFTPartitionChild checks nft partitions inside a fresh namespace.
func TestNFTPartitionChild(t *testing.T) {
	skipUnlessChild(t)
	mode, err := Enter(NetNS)
	if err != nil {
		t.Fatal(err)
	}
	if mode.Kind != KindNetNS || mode.Rootless != (os.Getuid() != 0 || inUserNamespace()) {
		t.Fatalf("mode %v", mode)
	}
	t.Logf("mode: %v", mode)
	nw, err := New(mode, 3, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nw.Close() })
	n1, n2, n3 := nw.NodeIP(1), nw.NodeIP(2), nw.NodeIP(3)

	srv := startEcho(t, n2)
	// dial connects from ip to node 2 within a short timeout.
	dial := func(ip string) error {
		c, err := dialFrom(ip, srv.addr, stallWait)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(n1); err != nil {
		t.Fatalf("dial from n1 before the partition: %v", err)
	}
	proxy, err := nw.AddLink(LinkRaft, 1, 2, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	viaProxy := mustDial(t, n1, proxy)
	roundTrip(t, viaProxy, []byte("proxied"))
	direct := mustDial(t, n1, srv.addr)
	roundTrip(t, direct, []byte("direct"))
	drainGot(srv)

	if err := nw.Partition([][2]int{{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if rules, err := nw.firewallRules(); err != nil || rules != 1 {
		t.Fatalf("%d nft rules (%v), want 1", rules, err)
	}
	var ne net.Error
	if err := dial(n1); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("dial from n1 during the partition: %v, want a timeout", err)
	}
	if err := dial(n3); err != nil {
		t.Fatalf("dial from n3 during the partition: %v", err)
	}
	if err := dial("127.0.0.1"); err != nil {
		t.Fatalf("dial from 127.0.0.1 (the harness) during the partition: %v", err)
	}
	// The cut drops n1's packets to n2, so n2's handshakes to n1 fail too:
	// the reason proxies hold new connections when either direction is cut.
	ln1, err := net.Listen("tcp", net.JoinHostPort(n1, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln1.Close()
	if c, err := dialFrom(n2, ln1.Addr().String(), stallWait); err == nil {
		c.Close()
		t.Fatal("n2 completed a handshake with n1 although n1's packets to n2 are dropped")
	}
	// An established connection stalls, then catches up after the heal.
	direct.Write([]byte("in flight"))
	viaProxy.Write([]byte("held"))
	if got := receivedWithin(srv, stallWait); len(got) != 0 {
		t.Fatalf("n2 received %q from n1 during the partition", got)
	}

	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	if rules, err := nw.firewallRules(); err != nil || rules != 0 {
		t.Fatalf("%d nft rules (%v) after heal, want 0", rules, err)
	}
	if err := dial(n1); err != nil {
		t.Fatalf("dial from n1 after heal: %v", err)
	}
	// TCP retransmits with backoff; allow a few seconds.
	readFull(t, direct, []byte("in flight"), 2*deliverWait)
	readFull(t, viaProxy, []byte("held"), 2*deliverWait)

	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == TableName {
			t.Fatalf("table %s left after Close", TableName)
		}
	}
}

// reexecTest returns a reexecer that runs TestReexecChild.
func reexecTest(t *testing.T, out io.Writer, attempts []nsAttempt) reexecer {
	env := withoutEnv(os.Environ(), EnvVar, envReportFD, envTestChild, envParentNetNS)
	return reexecer{
		exe:      "/proc/self/exe",
		args:     testArgs("TestReexecChild"),
		stdin:    nil,
		stdout:   out,
		stderr:   out,
		attempts: attempts,
		env:      append(env, envTestChild+"=TestReexecChild", envParentNetNS+"="+netnsID(t)),
	}
}

func TestReexec(t *testing.T) {
	if os.Getenv(EnvVar) != "" {
		t.Skipf("%s is set", EnvVar)
	}
	var out bytes.Buffer
	handled, code, err := reexecTest(t, &out, namespaceAttempts()).reexec(Auto)
	t.Logf("child output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !handled || code != childExitCode {
		t.Fatalf("handled=%v code=%d, want true and %d", handled, code, childExitCode)
	}
	if strings.Contains(out.String(), "mode: proxy") {
		t.Skip("no namespace here; Reexec fell back to proxy mode")
	}
	want := "mode: netns"
	if os.Getenv(envExpectRootless) != "" {
		want = "mode: netns (rootless user+net namespace)"
	}
	if !strings.Contains(out.String(), want) {
		t.Fatalf("child output lacks %q", want)
	}
}

func TestReexecFallsBackToProxy(t *testing.T) {
	if os.Getenv(EnvVar) != "" {
		t.Skipf("%s is set", EnvVar)
	}
	// A uid map of size 0 is invalid: creating the namespace fails.
	broken := []nsAttempt{{name: "broken", attr: func() *syscall.SysProcAttr {
		return &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 0}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 0}},
		}
	}}}
	var out bytes.Buffer
	r := reexecTest(t, &out, broken)
	if _, _, err := r.reexec(NetNS); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("reexec(netns) without a namespace: %v", err)
	}
	handled, code, err := r.reexec(Auto)
	t.Logf("child output:\n%s", out.String())
	if err != nil || !handled || code != childExitCode {
		t.Fatalf("reexec(auto) = %v, %d, %v; want true, %d, nil", handled, code, err, childExitCode)
	}
	if !strings.Contains(out.String(), "mode: proxy (broken: ") {
		t.Fatal("the fallback child did not report proxy mode with the reason")
	}
	if handled, _, err := r.reexec(Proxy); handled || err != nil {
		t.Fatalf("reexec(proxy) = %v, %v; want not handled", handled, err)
	}
}

// TestReexecChild runs in the child Reexec starts: it goes through Reexec and
// Enter as a command would, checks the namespace and exits childExitCode.
func TestReexecChild(t *testing.T) {
	skipUnlessChild(t)
	handled, code, err := Reexec(Auto, nil)
	if handled || code != 0 || err != nil {
		t.Fatalf("Reexec in the child = %v, %d, %v; want not handled", handled, code, err)
	}
	if os.Getenv(envReportFD) != "" {
		t.Fatalf("%s still set", envReportFD)
	}
	mode, err := Enter(Auto)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("mode: %v\n", mode)
	if mode.Kind == KindNetNS {
		if netnsID(t) == os.Getenv(envParentNetNS) {
			t.Fatal("the child shares its parent's network namespace")
		}
		if os.Getenv(envExpectRootless) != "" && !mode.Rootless {
			t.Fatal("an unprivileged user got a namespace that is not rootless")
		}
		srv := startEcho(t, "127.0.0.12")
		roundTrip(t, mustDial(t, "127.0.0.11", srv.addr), []byte("lo is up"))
	}
	if !t.Failed() {
		os.Exit(childExitCode)
	}
}

// TestReexecRootless runs TestReexec as an unprivileged user, so that Reexec
// takes its rootless path (CLONE_NEWUSER|CLONE_NEWNET with a uid map).
func TestReexecRootless(t *testing.T) {
	if os.Getenv(EnvVar) != "" {
		t.Skipf("%s is set", EnvVar)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user; TestReexec covers the rootless path here")
	}
	if testing.CoverMode() != "" {
		t.Skip("coverage output is not writable by the unprivileged user")
	}
	// The unprivileged user needs a binary it can execute.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "netfault.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	args := testArgs("TestReexec")
	cmd := exec.Command(bin, args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(withoutEnv(os.Environ(), EnvVar, envReportFD, envTestChild), envExpectRootless+"=1", "TMPDIR="+os.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	done := make(chan struct{})
	var out []byte
	go func() {
		defer close(done)
		out, err = cmd.CombinedOutput()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("unprivileged run hangs:\n%s", out)
	}
	t.Logf("unprivileged run:\n%s", out)
	if err != nil {
		t.Fatalf("unprivileged run: %v", err)
	}
	switch {
	case bytes.Contains(out, []byte("mode: netns (rootless user+net namespace)")):
	case bytes.Contains(out, []byte("mode: proxy")):
		t.Skip("unprivileged user namespaces are not allowed here")
	default:
		t.Fatal("the unprivileged run did not report its mode")
	}
}
