package namesrv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

func reg(broker, addr string, id, stateVersion int64, full bool, topics ...string) registration {
	r := registration{cluster: "c", broker: broker, addr: addr, id: id, timeout: DefaultExpiry, full: full,
		version: remoting.DataVersion{StateVersion: stateVersion, Counter: int64(len(topics))}}
	r.topics = map[string]queueConfig{}
	for _, t := range topics {
		r.topics[t] = queueConfig{read: 4, write: 4, perm: remoting.PermRead | remoting.PermWrite}
	}
	return r
}

// TestIncrementalRegistration: an Apache broker's registration listing
// only a new topic adds it and keeps the others; a raftmq (full table)
// registration removes what it leaves out.
func TestIncrementalRegistration(t *testing.T) {
	tb := newTable()
	now := time.Unix(1000, 0)
	mustReg := func(r registration) {
		t.Helper()
		if _, err := tb.register(now, r); err != nil {
			t.Fatal(err)
		}
		if err := tb.check(); err != nil {
			t.Fatal(err)
		}
	}
	mustReg(reg("a", "x:1", 0, 1, false, "T", "U"))
	mustReg(reg("a", "x:1", 0, 1, false, "V"))
	if got := tb.topicList(func(map[string]queueConfig) bool { return true }); fmt.Sprint(got) != "[T U V]" {
		t.Fatalf("after an incremental registration: %v", got)
	}
	mustReg(reg("a", "x:1", 0, 1, true, "U", "V"))
	if got := tb.topicList(func(map[string]queueConfig) bool { return true }); fmt.Sprint(got) != "[U V]" {
		t.Fatalf("after a full registration: %v", got)
	}
	// A follower's full table changes nothing.
	mustReg(reg("a", "y:1", 2, 1, true, "W"))
	if got := tb.topicList(func(map[string]queueConfig) bool { return true }); fmt.Sprint(got) != "[U V]" {
		t.Fatalf("after a follower's registration: %v", got)
	}
}

// TestStaleFenceNeedsLiveHolder: an expired holder (not yet scanned)
// does not fence.
func TestStaleFenceNeedsLiveHolder(t *testing.T) {
	tb := newTable()
	now := time.Unix(1000, 0)
	if _, err := tb.register(now, reg("a", "x:1", 0, 5, true, "T")); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.register(now, reg("a", "y:1", 0, 4, true, "T")); !errors.Is(err, errStale) {
		t.Fatalf("stale registration: %v", err)
	}
	later := now.Add(DefaultExpiry + time.Second)
	res, err := tb.register(later, reg("a", "y:1", 0, 4, true, "T"))
	if err != nil || res.displaced != "x:1" {
		t.Fatalf("registration after the holder expired: %+v %v", res, err)
	}
	if err := tb.check(); err != nil {
		t.Fatal(err)
	}
}

// TestTableInvariantsRandom runs random operations and checks the
// invariants after each.
func TestTableInvariantsRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	tb := newTable()
	now := time.Unix(1000, 0)
	brokers, addrs, topicNames := []string{"a", "b", "c"}, []string{"x:1", "y:1", "z:1", "w:1"}, []string{"T", "U", "V"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	for i := range 5000 {
		var op string
		switch rng.IntN(8) {
		case 0, 1, 2:
			var ts []string
			for _, n := range topicNames {
				if rng.IntN(2) == 0 {
					ts = append(ts, n)
				}
			}
			r := reg(pick(brokers), pick(addrs), int64(rng.IntN(3)), int64(rng.IntN(4)), rng.IntN(2) == 0, ts...)
			r.conn = rng.IntN(3)
			_, err := tb.register(now, r)
			op = fmt.Sprintf("register %+v: %v", r, err)
		case 3:
			k := liveKey{pick(brokers), pick(addrs)}
			tb.drop(k)
			op = fmt.Sprintf("drop %v", k)
		case 4:
			now = now.Add(time.Duration(rng.IntN(60)) * time.Second)
			for _, k := range tb.expired(now) {
				tb.drop(k)
			}
			op = "expire"
		case 5:
			conn := rng.IntN(3)
			for _, k := range tb.onConn(conn) {
				tb.drop(k)
			}
			op = fmt.Sprintf("close conn %d", conn)
		case 6:
			topic, cluster := pick(topicNames), []string{"", "c", "d"}[rng.IntN(3)]
			tb.deleteTopic(topic, cluster)
			op = fmt.Sprintf("delete %s in %q", topic, cluster)
		case 7:
			b := pick(brokers)
			tb.registerTopic(pick(topicNames), []remoting.QueueData{{BrokerName: b, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}})
			tb.setWritePerm(pick(brokers), rng.IntN(2) == 0)
			op = "register topic, set write perm"
		}
		if err := tb.check(); err != nil {
			t.Fatalf("step %d, %s: %v", i, op, err)
		}
		for _, name := range topicNames {
			if rd, ok := tb.route(name); ok && len(rd.QueueDatas) != len(rd.BrokerDatas) {
				t.Fatalf("step %d: route %+v", i, rd)
			}
		}
	}
}
