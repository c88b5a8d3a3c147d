package membership

import (
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

type fakeChan struct{ name string }

func (*fakeChan) Oneway(*remoting.Command) error { return nil }

func hb(client string, groups ...string) *remoting.HeartbeatData {
	h := &remoting.HeartbeatData{ClientID: client}
	for _, g := range groups {
		h.ConsumerDataSet = append(h.ConsumerDataSet, remoting.ConsumerData{
			GroupName: g, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
			SubscriptionDataSet: []remoting.SubscriptionData{{Topic: "T", SubString: "*", ExpressionType: "TAG"}},
		})
	}
	return h
}

func TestHeartbeatReportsMembershipChanges(t *testing.T) {
	r := New(0)
	t0 := time.Unix(1000, 0)
	a, b := &fakeChan{"a"}, &fakeChan{"b"}
	if got := r.Heartbeat(Client{Channel: a}, hb("c1", "g1", "g2"), t0); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Fatalf("first heartbeat changed %v, want [g1 g2]", got)
	}
	if got := r.Heartbeat(Client{Channel: a}, hb("c1", "g1", "g2"), t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("repeat heartbeat changed %v, want none", got)
	}
	if got := r.Heartbeat(Client{Channel: b}, hb("c2", "g1"), t0); !slices.Equal(got, []string{"g1"}) {
		t.Fatalf("second client changed %v, want [g1]", got)
	}
	if got := r.ConsumerIDs("g1"); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("ids %v", got)
	}
	if got := r.ConsumerChannels("g1"); len(got) != 2 {
		t.Fatalf("channels %v", got)
	}
	if got := r.Unregister("c2", "", "g1"); !slices.Equal(got, []string{"g1"}) {
		t.Fatalf("unregister changed %v", got)
	}
	if got := r.Unregister("c2", "", "g1"); len(got) != 0 {
		t.Fatalf("second unregister changed %v", got)
	}
	if got := r.ConsumerIDs("g1"); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("ids after unregister %v", got)
	}
}

func TestChannelCloseAndExpiry(t *testing.T) {
	r := New(120 * time.Second)
	t0 := time.Unix(1000, 0)
	a, b := &fakeChan{"a"}, &fakeChan{"b"}
	r.Heartbeat(Client{Channel: a}, hb("c1", "g"), t0)
	r.Heartbeat(Client{Channel: b}, hb("c2", "g"), t0.Add(60*time.Second))
	r.Heartbeat(Client{Channel: b}, &remoting.HeartbeatData{ClientID: "c2", ProducerDataSet: []remoting.ProducerData{{GroupName: "pg"}}}, t0)

	if got := r.Expire(t0.Add(120 * time.Second)); len(got) != 0 {
		t.Fatalf("expired at exactly 120 s: %v", got)
	}
	if got := r.Expire(t0.Add(121 * time.Second)); !slices.Equal(got, []string{"g"}) {
		t.Fatalf("expiry changed %v, want [g]", got)
	}
	if got := r.ConsumerIDs("g"); !slices.Equal(got, []string{"c2"}) {
		t.Fatalf("after expiry %v", got)
	}
	if got := r.Producers("pg"); len(got) != 0 {
		t.Fatalf("producer heard at t0 not expired: %v", got)
	}
	if got := r.ChannelClosed(b); !slices.Equal(got, []string{"g"}) {
		t.Fatalf("close changed %v", got)
	}
	if got := r.ConsumerGroups(); len(got) != 0 {
		t.Fatalf("groups left: %v", got)
	}
}

func TestSubscriptionNewestVersionWins(t *testing.T) {
	r := New(0)
	now := time.Unix(1000, 0)
	h1 := hb("c1", "g")
	h1.ConsumerDataSet[0].SubscriptionDataSet[0].SubString, h1.ConsumerDataSet[0].SubscriptionDataSet[0].SubVersion = "a", 5
	h2 := hb("c2", "g")
	h2.ConsumerDataSet[0].SubscriptionDataSet[0].SubString, h2.ConsumerDataSet[0].SubscriptionDataSet[0].SubVersion = "b", 7
	r.Heartbeat(Client{Channel: &fakeChan{}}, h1, now)
	r.Heartbeat(Client{Channel: &fakeChan{}}, h2, now)
	s, ok := r.Subscription("g", "T")
	if !ok || s.SubString != "b" {
		t.Fatalf("subscription %+v %v, want b", s, ok)
	}
	if _, ok := r.Subscription("g", "other"); ok {
		t.Fatal("found a subscription for an unsubscribed topic")
	}
	// The returned copy does not alias the registry.
	cs := r.Consumers("g")
	cs[0].Subscriptions[0].SubString = "mutated"
	if r.Consumers("g")[0].Subscriptions[0].SubString == "mutated" {
		t.Fatal("Consumers returned shared subscriptions")
	}
}
