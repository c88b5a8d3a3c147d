package interop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestTwoGroupsBehindANameServer: two groups register with a `raftmq
// namesrv`; a producer given only the name server spreads a topic's sends
// over both groups, and keeps sending, with the client's default retries
// and no failure, while one whole group is killed; a consumer given only
// the name server then gets every acknowledged message from both.
func TestTwoGroupsBehindANameServer(t *testing.T) {
	ns := startNamesrv(t)
	g1 := startGroup(t, "--namesrv", ns, "--broker-name", "it-g1")
	g2 := startGroup(t, "--namesrv", ns, "--broker-name", "it-g2")
	topic := uniq("two")
	g1.createTopic(t, topic, 4)
	g2.createTopic(t, topic, 4)
	resolver := primitive.NewPassthroughResolver([]string{ns})
	// Both groups' registrations name the topic within a second of its
	// creation; the producer, started after, routes over both at once.
	waitFor(t, 10*time.Second, "the name server routes the topic to both groups", func() bool {
		// A fresh admin client each time: the client caches routes.
		adm, err := admin.NewAdmin(admin.WithResolver(resolver))
		if err != nil {
			return false
		}
		defer adm.Close()
		mqs, err := adm.FetchPublishMessageQueues(context.Background(), topic)
		names := map[string]bool{}
		for _, mq := range mqs {
			names[strings.SplitN(mq.BrokerName, "@", 2)[0]] = true
		}
		return err == nil && names["it-g1"] && names["it-g2"]
	})
	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithGroupName(uniq("pg")), producer.WithInstanceName(uniq("p")))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	var acked []string
	byGroup := map[string]int{}
	failed := 0
	send := func(from, to int) {
		for i := from; i < to; i++ {
			body := fmt.Sprintf("two%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
			cancel()
			if err != nil {
				failed++
				t.Logf("send %s: %v", body, err)
				continue
			}
			acked = append(acked, body)
			byGroup[strings.SplitN(res.MessageQueue.BrokerName, "@", 2)[0]]++
		}
	}
	send(0, 200)
	if byGroup["it-g1"] == 0 || byGroup["it-g2"] == 0 {
		t.Fatalf("sends did not spread over both groups: %v", byGroup)
	}
	g2.killAll()
	send(200, 400)
	t.Logf("acknowledged sends by group %v; %d failed, 200 of them while it-g2 was down", byGroup, failed)
	if failed > 0 {
		t.Errorf("%d sends failed with one whole group down, want 0", failed)
	}
	for _, n := range g2.nodes {
		g2.start(n.id)
	}
	g2.waitLeader(30 * time.Second)

	box := newInbox()
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(uniq("cg")),
		consumer.WithInstance(uniq("c")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		box.add("c", msgs...)
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	waitFor(t, 60*time.Second, "every acknowledged message consumed from both groups", func() bool {
		_, n := box.missing(acked)
		return n == 0
	})
}
