package namesrv

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/remoting"
	"github.com/raftmq/raftmq/offsets"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// serve starts a name server on a free port.
func serve(t *testing.T, clock *fakeClock) (*Server, string) {
	s := New(Config{Now: clock.now})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ctx, ln, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, ln.Addr().String()
}

func dial(t *testing.T, addr string) *remoting.Conn {
	c, err := remoting.Dial(context.Background(), addr, remoting.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func register(t *testing.T, c *remoting.Conn, reg Registration) *remoting.Command {
	t.Helper()
	h, body, err := encodeRegistration(reg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.RegisterBroker, h.Encode(), body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func topics(names ...string) []offsets.TopicConfig {
	var out []offsets.TopicConfig
	for _, n := range names {
		out = append(out, offsets.NewTopicConfig(n, 4))
	}
	return out
}

func route(t *testing.T, c *remoting.Conn, topic string) (remoting.TopicRouteData, int32) {
	t.Helper()
	h := remoting.GetRouteInfoRequestHeader{Topic: topic}
	resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.GetRouteInfoByTopic, h.Encode(), nil))
	if err != nil {
		t.Fatal(err)
	}
	var rd remoting.TopicRouteData
	if resp.Code == remoting.Success {
		if rd, err = remoting.DecodeTopicRouteData(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	return rd, resp.Code
}

func TestRoutesFromRegistrations(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	s, addr := serve(t, clock)
	a1, a2, b1 := dial(t, addr), dial(t, addr), dial(t, addr)
	// Group a: leader at :1 (term 3), follower at :2; group b: leader at :5.
	register(t, a1, Registration{Cluster: "c", BrokerName: "a", BrokerAddr: "10.0.0.1:1", BrokerID: 0, StateVersion: 3, Topics: topics("T", "OnlyA")})
	register(t, a2, Registration{Cluster: "c", BrokerName: "a", BrokerAddr: "10.0.0.2:1", BrokerID: 2, StateVersion: 3, Topics: topics("IgnoredFromFollower")})
	register(t, b1, Registration{Cluster: "c", BrokerName: "b", BrokerAddr: "10.0.0.5:1", BrokerID: 0, StateVersion: 1, Topics: topics("T")})

	rd, code := route(t, a1, "T")
	if code != remoting.Success || len(rd.QueueDatas) != 2 || rd.QueueDatas[0].BrokerName != "a" || rd.QueueDatas[1].BrokerName != "b" {
		t.Fatalf("route of T: %d %+v", code, rd)
	}
	if got := rd.BrokerDatas[0].BrokerAddrs; got[0] != "10.0.0.1:1" || got[2] != "10.0.0.2:1" {
		t.Fatalf("group a's addresses: %v", got)
	}
	if _, code := route(t, a1, "IgnoredFromFollower"); code != remoting.TopicNotExist {
		t.Fatalf("a follower's topics were routed: %d", code)
	}

	// Leader change: :2 leads in term 4, :1 follows as id 1.
	register(t, a2, Registration{Cluster: "c", BrokerName: "a", BrokerAddr: "10.0.0.2:1", BrokerID: 0, StateVersion: 4, Topics: topics("T", "OnlyA")})
	register(t, a1, Registration{Cluster: "c", BrokerName: "a", BrokerAddr: "10.0.0.1:1", BrokerID: 1, StateVersion: 4})
	rd, _ = route(t, a1, "OnlyA")
	if got := rd.BrokerDatas[0].BrokerAddrs; got[0] != "10.0.0.2:1" || got[1] != "10.0.0.1:1" || len(got) != 2 {
		t.Fatalf("after the leader change: %v", got)
	}
	// A deposed leader (term 3) cannot take the master's place back.
	if resp := register(t, a1, Registration{Cluster: "c", BrokerName: "a", BrokerAddr: "10.0.0.1:1", BrokerID: 0, StateVersion: 3, Topics: topics("T")}); resp.Code == remoting.Success {
		t.Fatal("a stale leader's registration was accepted")
	}
	rd, _ = route(t, a1, "T")
	if rd.BrokerDatas[0].BrokerAddrs[0] != "10.0.0.2:1" {
		t.Fatalf("stale leader took over: %v", rd.BrokerDatas[0].BrokerAddrs)
	}

	// Cluster info and topic lists.
	ci := s.ClusterInfo()
	if len(ci.ClusterAddrTable["c"]) != 2 || ci.BrokerAddrTable["b"].BrokerAddrs[0] != "10.0.0.5:1" {
		t.Fatalf("cluster info: %+v", ci)
	}
	resp, err := a1.Invoke(context.Background(), remoting.NewRequest(remoting.GetAllTopicListFromNameServer, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	var tl remoting.TopicList
	if err := json.Unmarshal(resp.Body, &tl); err != nil || len(tl.TopicList) != 2 {
		t.Fatalf("topic list: %s %v", resp.Body, err)
	}

	// A closed connection drops its registrations at once: group b goes.
	b1.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if rd, _ := route(t, a1, "T"); len(rd.QueueDatas) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closed broker still routed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Expiry: 120 s without renewal.
	clock.add(119 * time.Second)
	s.Expire()
	if _, code := route(t, a1, "T"); code != remoting.Success {
		t.Fatal("expired early")
	}
	clock.add(2 * time.Second)
	s.Expire()
	if _, code := route(t, a1, "T"); code != remoting.TopicNotExist {
		t.Fatal("not expired after 121 s")
	}
	// Unsupported requests are errors the client sees.
	resp, _ = a1.Invoke(context.Background(), remoting.NewRequest(remoting.SendMessage, nil, nil))
	if resp.Code != remoting.RequestCodeNotSupported {
		t.Fatalf("unsupported request answered %d", resp.Code)
	}
}

func TestRegistrar(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	s, addr := serve(t, clock)
	var mu sync.Mutex
	state := []Registration{{Cluster: "c", BrokerName: "g", BrokerAddr: "10.0.0.9:1", BrokerID: 0, StateVersion: 1, Topics: topics("T")}}
	r := NewRegistrar(RegistrarConfig{Addrs: []string{addr}, Interval: time.Hour, State: func() []Registration {
		mu.Lock()
		defer mu.Unlock()
		return state
	}})
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("first registration", func() bool { _, ok := s.Route("T"); return ok })
	mu.Lock()
	state = []Registration{{Cluster: "c", BrokerName: "g", BrokerAddr: "10.0.0.9:1", BrokerID: 0, StateVersion: 1, Topics: topics("T", "U")}}
	mu.Unlock()
	r.Trigger()
	wait("a triggered registration within a second", func() bool { _, ok := s.Route("U"); return ok })
	r.Close()
	if _, ok := s.Route("T"); ok {
		t.Fatal("Close did not unregister")
	}
	if got := ParseAddrs(" a:1;b:2,, ;c:3"); len(got) != 3 || got[2] != "c:3" {
		t.Fatalf("ParseAddrs: %v", got)
	}
}
