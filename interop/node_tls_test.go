package interop

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestNodeTLS: three brokers in enforcing TLS mode (their gRPC ports
// serve TLS only) with raftmq's demo certificates. Apache's Node.js
// SimpleConsumer and producer, both with sslEnabled, work over TLS: the
// producer sends five messages through a follower, the consumer on
// another node receives and acks each once.
//
// How the client trusts the CA: it builds its channel credentials with
// grpc-js's ChannelCredentials.createSsl() and no roots of its own, and
// grpc-js (1.14.7 here) then takes its roots from the file named by
// GRPC_DEFAULT_SSL_ROOTS_FILE_PATH. NODE_EXTRA_CA_CERTS does not work with
// this client: its startup fails with "unable to verify the first
// certificate" although a plain tls.connect in the same Node.js (20)
// process, with the same variable, verifies the broker's certificate. The
// test checks that failure, so that it notices when the variable starts
// to work.

func TestNodeTLS(t *testing.T) {
	dir := nodeDir(t)
	flags, caFile := tlsFlags(t, "enforcing")
	g := planGroup(t, flags)
	t.Cleanup(g.close)
	for _, n := range g.nodes {
		g.start(n.id)
	}
	waitReadyHTTPS(t, g, caFile)
	topic, cgroup := uniq("nodetls"), uniq("nodetlsgroup")
	if out, err := g.cli("admin", "topic", "create", topic, "--queues", "4", "--tls-ca", caFile); err != nil {
		t.Fatalf("create topic over TLS: %v\n%s", err, out)
	}
	trust := "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=" + caFile

	b, _ := json.Marshal(map[string]any{"endpoints": g.nodes[0].grpc, "group": cgroup, "topic": topic,
		"want": 5, "forMs": 40000, "holdMs": 0, "ssl": true})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "consume.js", string(b))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), trust)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var conn string
	if err := poll(30*time.Second, func() bool {
		conn, _ = g.cli("admin", "consumer", "connection", "-g", cgroup, "--tls-ca", caFile)
		return strings.Contains(conn, "NODE_JS") && strings.Contains(conn, topic)
	}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the Node.js consumer over TLS did not connect:\n%s\nconsume.js: %s", conn, stderr.String())
	}
	// Its first receive (a long poll of 3 s) has placed the group at the
	// end of the queues; send after it.
	time.Sleep(4 * time.Second)

	plan := map[string]any{"endpoints": g.nodes[1].grpc, "topics": []string{topic}, "topic": topic,
		"prefix": "tls-", "normal": 5, "ssl": true}
	sent, perr, err := runNodeEnv(t, dir, []string{trust}, plan, 60*time.Second)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("produce.js over TLS: %v\n%s", err, perr)
	}
	var want []string
	for _, s := range sent.Normal {
		if s.ID == "" {
			t.Errorf("send of %s acknowledged without a message id", s.Body)
		}
		want = append(want, s.Body)
	}
	if len(want) != 5 {
		t.Fatalf("produce.js acknowledged %d sends, want 5", len(want))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume.js: %v\n%s", err, stderr.String())
	}
	var res struct {
		Started bool     `json:"started"`
		Acked   int      `json:"acked"`
		Bodies  []string `json:"bodies"`
		Error   string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("consume.js printed %q: %v", stdout.String(), err)
	}
	sort.Strings(res.Bodies)
	sort.Strings(want)
	if !res.Started || res.Error != "" || strings.Join(res.Bodies, ",") != strings.Join(want, ",") || res.Acked != len(want) {
		t.Fatalf("received %v (%d acked, started %v, error %q), want each of %v once, acked",
			res.Bodies, res.Acked, res.Started, res.Error, want)
	}

	// The same producer with the CA in NODE_EXTRA_CA_CERTS only: the
	// client does not trust the broker.
	_, perr, err = runNodeEnv(t, dir, []string{"NODE_EXTRA_CA_CERTS=" + caFile}, plan, 60*time.Second)
	if err == nil {
		t.Fatal("produce.js with NODE_EXTRA_CA_CERTS (no GRPC_DEFAULT_SSL_ROOTS_FILE_PATH) succeeded over TLS: " +
			"the variable works with this client now; trust the CA with it and update this test")
	}
	if !strings.Contains(perr, "unable to verify the first certificate") {
		t.Fatalf("produce.js with NODE_EXTRA_CA_CERTS failed, but not on the certificate:\n%s", perr)
	}
}
