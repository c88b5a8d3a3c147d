package interop

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// tlsFlags makes the demo certificates in a temporary directory with
// `raftmq cert demo` and returns the broker flags for mode (every node
// uses n1's certificate, which names 127.0.0.1) and the CA file.
func tlsFlags(t *testing.T, mode string) (flags []string, caFile string) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command(binary, "cert", "demo", "--out", dir, "--nodes", "1").CombinedOutput(); err != nil {
		t.Fatalf("raftmq cert demo: %v\n%s", err, out)
	}
	caFile = filepath.Join(dir, "ca.pem")
	return []string{"--tls-mode", mode, "--tls-ca", caFile,
		"--tls-cert", filepath.Join(dir, "n1.pem"), "--tls-key", filepath.Join(dir, "n1-key.pem")}, caFile
}

// useTLS makes this process's rocketmq-client-go clients use TLS until
// the test ends. WithTls is process-wide in rocketmq-client-go: it sets
// UseTls on the package's DefaultRemotingClientConfig, which every
// producer and consumer shares, so a test cannot have a plaintext and a
// TLS client of that library at once; the plaintext side is raftmq's CLI.
func useTLS(t *testing.T) {
	t.Cleanup(func() {
		// Any option of that library applies to the shared
		// configuration; a producer never started is enough.
		if _, err := rocketmq.NewProducer(producer.WithTls(false), producer.WithInstanceName(uniq("reset")),
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:1"}))); err != nil {
			t.Errorf("reset rocketmq-client-go's TLS setting: %v", err)
		}
	})
}

// TestTLSPermissive: on a group in permissive mode, a rocketmq-client-go
// producer with WithTls(true) (TLS without checking the certificate, as
// that client does) sends, raftmq's CLI sends in plaintext, and a TLS
// push consumer receives both messages.
func TestTLSPermissive(t *testing.T) {
	flags, _ := tlsFlags(t, "permissive")
	g := startGroup(t, flags...)
	g.createTopic(t, "TLST", 2)
	useTLS(t)
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), "TLST", consumer.MessageSelector{}, box, consumer.WithTls(true))
	sendSync(t, newProducer(t, g, producer.WithTls(true)), message("TLST", "over-tls"))
	if out, err := g.cli("produce", "--topic", "TLST", "plaintext"); err != nil {
		t.Fatalf("plaintext send to a permissive group: %v\n%s", err, out)
	}
	box.waitAll(t, 30*time.Second, "messages sent over TLS and plaintext, consumed over TLS", []string{"over-tls", "plaintext"})
}

// TestTLSEnforcing: on a group in enforcing mode (HTTP port included), a
// producer with WithTls(true) sends and a TLS push consumer receives; a
// plaintext send (raftmq's CLI) is refused, the CLI with --tls-ca is
// served.
func TestTLSEnforcing(t *testing.T) {
	flags, caFile := tlsFlags(t, "enforcing")
	g := planGroup(t, flags)
	t.Cleanup(g.close)
	for _, n := range g.nodes {
		g.start(n.id)
	}
	waitReadyHTTPS(t, g, caFile)
	if g.leader() != 0 {
		t.Fatal("/status answered over plaintext HTTP on an enforcing node")
	}
	if out, err := g.cli("admin", "topic", "create", "TLST", "--queues", "2", "--tls-ca", caFile); err != nil {
		t.Fatalf("create topic over TLS: %v\n%s", err, out)
	}
	useTLS(t)
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), "TLST", consumer.MessageSelector{}, box, consumer.WithTls(true))
	sendSync(t, newProducer(t, g, producer.WithTls(true)), message("TLST", "enforced"))
	if out, err := g.cli("produce", "--topic", "TLST", "--tls-ca", caFile, "cli-over-tls"); err != nil {
		t.Fatalf("CLI send with --tls-ca: %v\n%s", err, out)
	}
	box.waitAll(t, 30*time.Second, "messages sent and consumed over TLS", []string{"enforced", "cli-over-tls"})
	if out, err := g.cli("produce", "--topic", "TLST", "plain"); err == nil {
		t.Errorf("a plaintext send to an enforcing group was accepted:\n%s", out)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(box.deliveries("plain")); n > 0 {
		t.Errorf("the refused plaintext message was delivered %d times", n)
	}
}

// waitReadyHTTPS waits for a ready leader on a group whose HTTP port serves
// TLS only (enforcing mode): the harness's plaintext /status check cannot
// see it, a client trusting caFile can.
func waitReadyHTTPS(t *testing.T, g *group, caFile string) {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	waitFor(t, 30*time.Second, "a ready leader (status over HTTPS)", func() bool {
		g.checkAlive()
		for _, n := range g.nodes {
			resp, err := hc.Get("https://" + n.http + "/status")
			if err != nil {
				continue
			}
			var st nodeStatus
			ok := json.NewDecoder(resp.Body).Decode(&st) == nil && st.LeaderReady
			resp.Body.Close()
			if ok {
				return true
			}
		}
		return false
	})
}
