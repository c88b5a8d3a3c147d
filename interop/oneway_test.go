package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
)

// TestOnewayProducerExits: a rocketmq-client-go producer sends 300
// one-way messages and shuts down at once, as a short-lived producer
// does. With failover routes, one send in three goes to a follower (each
// follower's name lists one write queue beside the topic's four), which
// forwards it to the leader; every one must be stored, although the
// producer's connections closed right after the last write.
func TestOnewayProducerExits(t *testing.T) {
	g := startGroup(t)
	topic := uniq("oneway")
	g.createTopic(t, topic, 4)
	const n = 300
	p := newProducer(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("oneway-%d", i)
		if err := p.SendOneWay(ctx, message(topic, want[i])); err != nil {
			t.Fatalf("SendOneWay %d: %v", i, err)
		}
	}
	if err := p.Shutdown(); err != nil {
		t.Fatalf("producer shutdown: %v", err)
	}
	box := newInbox()
	startConsumer(t, g, "c", uniq("cg"), topic, consumer.MessageSelector{}, box)
	box.waitAll(t, 30*time.Second, "one-way messages of a producer that exited", want)
}
