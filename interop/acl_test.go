package interop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

const interopACL = `
accounts:
  - accessKey: itproducer
    secretKey: itproducer-secret
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - ACLT=PUB|SUB
  - accessKey: itoperator
    secretKey: itoperator-secret
    admin: true
`

// TestACLWithRocketMQCredentials: a group started with --acl-file checks
// the signatures rocketmq-client-go computes (primitive.Credentials): a
// producer and a push consumer with an account's keys send and consume; a
// producer without keys, with a wrong secret, or sending to a topic the
// account may not write is refused, and the client's error carries the
// broker's reason (routes are answered without keys, as RocketMQ's name
// server answers them, so the send reaches the broker); admin requests from
// raftmq's CLI need the admin account's keys.
func TestACLWithRocketMQCredentials(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte(interopACL), 0o644); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "acl.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGroup(t, "--acl-file", file, "--acl-key-file", keyFile)
	if out, err := g.cli("admin", "topic", "create", "ACLT", "--queues", "2"); err == nil {
		t.Fatalf("topic create without credentials succeeded:\n%s", out)
	}
	t.Setenv("RAFTMQ_ACCESS_KEY", "itoperator")
	t.Setenv("RAFTMQ_SECRET_KEY", "itoperator-secret")
	g.createTopic(t, "ACLT", 2)
	g.createTopic(t, "ACLOther", 2)

	good := primitive.Credentials{AccessKey: "itproducer", SecretKey: "itproducer-secret"}
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), "ACLT", consumer.MessageSelector{}, box, consumer.WithCredentials(good))
	p := newProducer(t, g, producer.WithCredentials(good), producer.WithRetry(0))
	sendSync(t, p, message("ACLT", "signed-1"))
	sendSync(t, p, message("ACLT", "signed-2"))
	box.waitAll(t, 30*time.Second, "messages sent and consumed with an account's keys", []string{"signed-1", "signed-2"})

	refused := func(what string, p interface {
		SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
	}, topic, reason string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		res, err := p.SendSync(ctx, message(topic, what))
		switch {
		case err == nil:
			t.Errorf("%s: send accepted (%v), want it refused", what, res)
		case !strings.Contains(err.Error(), "CODE: 16") || !strings.Contains(err.Error(), reason):
			t.Errorf("%s: refused with %q, want NO_PERMISSION (CODE: 16) and the broker's reason %q", what, err, reason)
		default:
			t.Logf("%s: refused: %v", what, err)
		}
	}
	refused("no keys", newProducer(t, g, producer.WithRetry(0)), "ACLT", "No accessKey is configured")
	refused("wrong secret", newProducer(t, g, producer.WithRetry(0),
		producer.WithCredentials(primitive.Credentials{AccessKey: "itproducer", SecretKey: "wrong-secret"})), "ACLT",
		"Check signature failed for accessKey=itproducer")
	refused("a topic the account may not write", p, "ACLOther", "No default permission for topic:ACLOther")
	time.Sleep(time.Second)
	if n := len(box.deliveries("no keys")) + len(box.deliveries("wrong secret")); n > 0 {
		t.Errorf("%d refused messages were delivered", n)
	}
}
