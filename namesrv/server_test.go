package namesrv

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
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

// testLogger sends logs to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// serve starts a name server on a free port; its invariants are checked
// when the test ends.
func serve(t *testing.T, clock *fakeClock) (*Server, string) {
	t.Helper()
	s := New(Config{Now: clock.now, Logger: testLogger(t)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, time.Hour) }()
	t.Cleanup(func() {
		checkInvariants(t, s)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

func checkInvariants(t *testing.T, s *Server) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.mu.t.check(); err != nil {
		t.Error(err)
	}
}

func dial(t *testing.T, addr string) *remoting.Conn {
	t.Helper()
	c, err := remoting.Dial(context.Background(), addr, remoting.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func invoke(t *testing.T, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// register sends reg as the Registrar encodes it.
func register(t *testing.T, c *remoting.Conn, reg Registration) *remoting.Command {
	t.Helper()
	r := &Registrar{versions: map[regKey]*version{}}
	req, err := r.registerRequest(reg)
	if err != nil {
		t.Fatal(err)
	}
	return invoke(t, c, req)
}

func mustRegister(t *testing.T, c *remoting.Conn, reg Registration) *remoting.Command {
	t.Helper()
	resp := register(t, c, reg)
	if resp.Code != remoting.Success {
		t.Fatalf("register %+v: %d %s", reg, resp.Code, resp.Remark)
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
	resp := invoke(t, c, remoting.NewRequest(remoting.GetRouteInfoByTopic, h.Encode(), nil))
	var rd remoting.TopicRouteData
	if resp.Code == remoting.Success {
		var err error
		if rd, err = remoting.DecodeTopicRouteData(resp.Body); err != nil {
			t.Fatal(err)
		}
	} else if want := "No topic route info in name server for the topic: " + topic; resp.Code == remoting.TopicNotExist && resp.Remark != want {
		t.Fatalf("remark %q, want %q", resp.Remark, want)
	}
	return rd, resp.Code
}

// addrsOf returns the addresses of broker name in topic's route.
func addrsOf(t *testing.T, c *remoting.Conn, topic, broker string) map[int64]string {
	t.Helper()
	rd, _ := route(t, c, topic)
	for _, bd := range rd.BrokerDatas {
		if bd.BrokerName == broker {
			return bd.BrokerAddrs
		}
	}
	return nil
}

// eventually polls cond for up to 2 s (for what happens on another
// goroutine after a connection closes, not for expiry: the clock is fake).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	a1 = Registration{Cluster: "c", BrokerName: "a", BrokerAddr: "10.0.0.1:10911", BrokerID: 0, StateVersion: 3}
	a2 = Registration{Cluster: "c", BrokerName: "a", BrokerAddr: "10.0.0.2:10911", BrokerID: 2, StateVersion: 3}
	b1 = Registration{Cluster: "c", BrokerName: "b", BrokerAddr: "10.0.0.5:10911", BrokerID: 0, StateVersion: 1}
)

func with(r Registration, id, stateVersion int64, ts []offsets.TopicConfig) Registration {
	r.BrokerID, r.StateVersion, r.Topics = id, stateVersion, ts
	return r
}

func TestTwoBrokerNamesOverlappingTopics(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	ca, cf, cb := dial(t, addr), dial(t, addr), dial(t, addr)
	mustRegister(t, ca, with(a1, 0, 3, topics("T", "OnlyA")))
	mustRegister(t, cf, with(a2, 2, 3, topics("FromFollower")))
	mustRegister(t, cb, with(b1, 0, 1, topics("T")))

	rd, code := route(t, ca, "T")
	if code != remoting.Success || len(rd.QueueDatas) != 2 || len(rd.BrokerDatas) != 2 {
		t.Fatalf("route of T: %d %+v", code, rd)
	}
	for i, name := range []string{"a", "b"} {
		if qd := rd.QueueDatas[i]; qd.BrokerName != name || qd.ReadQueueNums != 4 || qd.WriteQueueNums != 4 || qd.Perm != 6 {
			t.Fatalf("queue data %d: %+v", i, qd)
		}
		if bd := rd.BrokerDatas[i]; bd.BrokerName != name || bd.Cluster != "c" {
			t.Fatalf("broker data %d: %+v", i, bd)
		}
	}
	if got := rd.BrokerDatas[0].BrokerAddrs; len(got) != 2 || got[0] != a1.BrokerAddr || got[2] != a2.BrokerAddr {
		t.Fatalf("a's addresses: %v", got)
	}
	if got := rd.BrokerDatas[1].BrokerAddrs; len(got) != 1 || got[0] != b1.BrokerAddr {
		t.Fatalf("b's addresses: %v", got)
	}
	if rd, _ := route(t, ca, "OnlyA"); len(rd.QueueDatas) != 1 || rd.BrokerDatas[0].BrokerName != "a" {
		t.Fatalf("route of OnlyA: %+v", rd)
	}
	if _, code := route(t, ca, "FromFollower"); code != remoting.TopicNotExist {
		t.Fatalf("a follower's topic was routed: %d", code)
	}
	// The body is compact: the Go client splits brokerAddrs by hand.
	h := remoting.GetRouteInfoRequestHeader{Topic: "T"}
	body := string(invoke(t, ca, remoting.NewRequest(remoting.GetRouteInfoByTopic, h.Encode(), nil)).Body)
	if !strings.Contains(body, `"brokerAddrs":{"0":"10.0.0.1:10911","2":"10.0.0.2:10911"}`) || strings.Contains(body, " ") {
		t.Fatalf("route body: %s", body)
	}
}

func TestLeaderChangeAndStaleLeader(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	c1, c2 := dial(t, addr), dial(t, addr)
	mustRegister(t, c1, with(a1, 0, 3, topics("T")))
	mustRegister(t, c2, with(a2, 2, 3, nil))

	// :2 leads in term 4. Its id-2 entry goes, and it displaces :1.
	resp := mustRegister(t, c2, with(a2, 0, 4, topics("T")))
	if rh, _ := remoting.DecodeRegisterBrokerResponseHeader(resp.ExtFields); rh.MasterAddr != "" {
		t.Fatalf("a master's registration was told of a master: %+v", rh)
	}
	if got := addrsOf(t, c1, "T", "a"); len(got) != 1 || got[0] != a2.BrokerAddr {
		t.Fatalf("after the new leader registered: %v", got)
	}
	// The deposed leader, still in term 3, claims id 0: refused.
	resp = register(t, c1, with(a1, 0, 3, topics("T", "Stale")))
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "stale registration") {
		t.Fatalf("stale leader's registration answered %d %q", resp.Code, resp.Remark)
	}
	if got := addrsOf(t, c1, "T", "a"); len(got) != 1 || got[0] != a2.BrokerAddr {
		t.Fatalf("the stale leader changed the route: %v", got)
	}
	if _, code := route(t, c1, "Stale"); code != remoting.TopicNotExist {
		t.Fatal("the stale leader's topics were taken")
	}
	// It learns the new term and registers as a follower, id 1.
	resp = mustRegister(t, c1, with(a1, 1, 4, nil))
	if rh, _ := remoting.DecodeRegisterBrokerResponseHeader(resp.ExtFields); rh.MasterAddr != a2.BrokerAddr || rh.HAServerAddr != a2.BrokerAddr {
		t.Fatalf("a follower's registration was not told the master: %+v", rh)
	}
	if got := addrsOf(t, c1, "T", "a"); len(got) != 2 || got[0] != a2.BrokerAddr || got[1] != a1.BrokerAddr {
		t.Fatalf("after the old leader became a follower: %v", got)
	}
	// It is elected again in term 5: accepted.
	mustRegister(t, c1, with(a1, 0, 5, topics("T")))
	if got := addrsOf(t, c1, "T", "a"); len(got) != 1 || got[0] != a1.BrokerAddr {
		t.Fatalf("after the second leader change: %v", got)
	}
}

func TestConnectionCloseDropsBroker(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	ca, cf, cb := dial(t, addr), dial(t, addr), dial(t, addr)
	mustRegister(t, ca, with(a1, 0, 3, topics("T")))
	mustRegister(t, cf, with(a2, 2, 3, nil))
	mustRegister(t, cb, with(b1, 0, 1, topics("T")))

	cb.Close()
	eventually(t, "b still routed after its connection closed", func() bool {
		rd, _ := route(t, ca, "T")
		return len(rd.QueueDatas) == 1 && rd.QueueDatas[0].BrokerName == "a"
	})
	// The leader's connection closes: a's queues stay while its follower
	// is registered (consumers read from it), without an id 0.
	ca.Close()
	eventually(t, "the leader still routed after its connection closed", func() bool {
		got := addrsOf(t, cf, "T", "a")
		return len(got) == 1 && got[2] == a2.BrokerAddr
	})
	cf.Close()
	c := dial(t, addr)
	eventually(t, "a still routed with no address left", func() bool {
		_, code := route(t, c, "T")
		return code == remoting.TopicNotExist
	})
}

func TestExpiry(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	s, addr := serve(t, clock)
	c := dial(t, addr)
	mustRegister(t, c, with(a1, 0, 3, topics("T")))
	r := &Registrar{versions: map[regKey]*version{}}
	req, err := r.registerRequest(with(b1, 0, 1, topics("T")))
	if err != nil {
		t.Fatal(err)
	}
	req.ExtFields["heartbeatTimeoutMillis"] = "10000"
	if resp := invoke(t, c, req); resp.Code != remoting.Success {
		t.Fatalf("register with heartbeatTimeoutMillis: %d %s", resp.Code, resp.Remark)
	}

	clock.add(11 * time.Second) // past b's own timeout
	s.Expire()
	if rd, _ := route(t, c, "T"); len(rd.QueueDatas) != 1 || rd.QueueDatas[0].BrokerName != "a" {
		t.Fatalf("b not expired after its heartbeatTimeoutMillis: %+v", rd)
	}
	clock.add(108 * time.Second) // 119 s after a registered
	s.Expire()
	if _, code := route(t, c, "T"); code != remoting.Success {
		t.Fatal("expired before 120 s")
	}
	// BROKER_HEARTBEAT renews without a registration.
	hb := remoting.BrokerHeartbeatRequestHeader{ClusterName: "c", BrokerAddr: a1.BrokerAddr, BrokerName: "a"}
	if resp := invoke(t, c, remoting.NewRequest(remoting.BrokerHeartbeat, hb.Encode(), nil)); resp.Code != remoting.Success {
		t.Fatalf("broker heartbeat: %d", resp.Code)
	}
	clock.add(119 * time.Second)
	s.Expire()
	if _, code := route(t, c, "T"); code != remoting.Success {
		t.Fatal("the heartbeat did not renew the registration")
	}
	clock.add(2 * time.Second)
	s.Expire()
	if _, code := route(t, c, "T"); code != remoting.TopicNotExist {
		t.Fatal("not expired 121 s after the last renewal")
	}
}

func TestUnregister(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	c := dial(t, addr)
	mustRegister(t, c, with(a1, 0, 3, topics("T")))
	mustRegister(t, c, with(a2, 2, 3, nil))
	// A deposed leader's unregister names its address: the new one stays.
	h := remoting.UnregisterBrokerRequestHeader{BrokerName: "a", BrokerAddr: "10.0.0.9:10911", ClusterName: "c", BrokerID: 0}
	if resp := invoke(t, c, remoting.NewRequest(remoting.UnregisterBroker, h.Encode(), nil)); resp.Code != remoting.Success {
		t.Fatalf("unregister: %d", resp.Code)
	}
	if got := addrsOf(t, c, "T", "a"); len(got) != 2 {
		t.Fatalf("an unknown address's unregister changed the route: %v", got)
	}
	for _, reg := range []Registration{a1, a2} {
		h := remoting.UnregisterBrokerRequestHeader{BrokerName: "a", BrokerAddr: reg.BrokerAddr, ClusterName: "c", BrokerID: reg.BrokerID}
		invoke(t, c, remoting.NewRequest(remoting.UnregisterBroker, h.Encode(), nil))
	}
	if _, code := route(t, c, "T"); code != remoting.TopicNotExist {
		t.Fatal("still routed after both addresses unregistered")
	}
}

func TestClusterInfoAndTopicLists(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	c := dial(t, addr)
	mustRegister(t, c, with(a1, 0, 3, topics("T", "OnlyA")))
	mustRegister(t, c, with(a2, 2, 3, nil))
	other := Registration{Cluster: "d", BrokerName: "x", BrokerAddr: "10.0.1.1:10911", Topics: topics("T", "OnlyX")}
	mustRegister(t, c, other)

	resp := invoke(t, c, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	var ci struct {
		BrokerAddrTable map[string]struct {
			Cluster     string            `json:"cluster"`
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
		ClusterAddrTable map[string][]string `json:"clusterAddrTable"`
	}
	if err := json.Unmarshal(resp.Body, &ci); err != nil {
		t.Fatalf("106 body %s: %v", resp.Body, err)
	}
	if a := ci.BrokerAddrTable["a"]; a.Cluster != "c" || a.BrokerAddrs["0"] != a1.BrokerAddr || a.BrokerAddrs["2"] != a2.BrokerAddr {
		t.Fatalf("106 broker a: %+v", a)
	}
	if got := ci.ClusterAddrTable; len(got) != 2 || len(got["c"]) != 1 || got["c"][0] != "a" || got["d"][0] != "x" {
		t.Fatalf("106 clusters: %v", got)
	}

	list := func(code int32, ext map[string]string) remoting.TopicList {
		t.Helper()
		resp := invoke(t, c, remoting.NewRequest(code, ext, nil))
		var tl remoting.TopicList
		if err := json.Unmarshal(resp.Body, &tl); err != nil || resp.Code != remoting.Success {
			t.Fatalf("code %d: %d %s %v", code, resp.Code, resp.Body, err)
		}
		return tl
	}
	if got := list(remoting.GetAllTopicListFromNameServer, nil).TopicList; strings.Join(got, ",") != "OnlyA,OnlyX,T" {
		t.Fatalf("206: %v", got)
	}
	byCluster := remoting.GetTopicsByClusterRequestHeader{Cluster: "d"}
	if got := list(remoting.GetTopicsByCluster, byCluster.Encode()).TopicList; strings.Join(got, ",") != "OnlyX,T" {
		t.Fatalf("224: %v", got)
	}
	if tl := list(remoting.GetSystemTopicListFromNS, nil); strings.Join(tl.TopicList, ",") != "c,a,d,x" || tl.BrokerAddr != a1.BrokerAddr {
		t.Fatalf("304: %+v", tl)
	}
	if got := list(remoting.GetUnitTopicList, nil).TopicList; len(got) != 0 {
		t.Fatalf("311: %v", got)
	}
	if resp := invoke(t, c, remoting.NewRequest(remoting.GetTopicsByCluster, nil, nil)); resp.Code != remoting.InvalidParameter {
		t.Fatalf("224 without a cluster: %d", resp.Code)
	}
}

func TestDeleteTopicAndWritePerm(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	c := dial(t, addr)
	r := &Registrar{versions: map[regKey]*version{}} // keeps a's data version
	regA := func() {
		t.Helper()
		req, err := r.registerRequest(with(a1, 0, 3, topics("T", "U")))
		if err != nil {
			t.Fatal(err)
		}
		if resp := invoke(t, c, req); resp.Code != remoting.Success {
			t.Fatalf("register a: %d %s", resp.Code, resp.Remark)
		}
	}
	regA()
	mustRegister(t, c, Registration{Cluster: "d", BrokerName: "x", BrokerAddr: "10.0.1.1:10911", Topics: topics("T", "U")})

	del := remoting.DeleteTopicInNamesrvRequestHeader{Topic: "T", ClusterName: "d"}
	invoke(t, c, remoting.NewRequest(remoting.DeleteTopicInNameServer, del.Encode(), nil))
	if rd, _ := route(t, c, "T"); len(rd.QueueDatas) != 1 || rd.QueueDatas[0].BrokerName != "a" {
		t.Fatalf("T after deleting it in cluster d: %+v", rd)
	}
	del = remoting.DeleteTopicInNamesrvRequestHeader{Topic: "T"}
	invoke(t, c, remoting.NewRequest(remoting.DeleteTopicInNameServer, del.Encode(), nil))
	if _, code := route(t, c, "T"); code != remoting.TopicNotExist {
		t.Fatal("T routed after deleting it everywhere")
	}

	wipe := remoting.BrokerNameRequestHeader{BrokerName: "a"}
	resp := invoke(t, c, remoting.NewRequest(remoting.WipeWritePermOfBroker, wipe.Encode(), nil))
	if rh, err := remoting.DecodeWritePermResponseHeader(remoting.WipeWritePermOfBroker, resp.ExtFields); err != nil || rh.TopicCount != 1 {
		t.Fatalf("wipe: %+v %v", rh, err)
	}
	perm := func() int {
		rd, _ := route(t, c, "U")
		return rd.QueueDatas[0].Perm
	}
	if p := perm(); p != remoting.PermRead {
		t.Fatalf("perm after wipe: %d", p)
	}
	// The broker's next registration, unchanged, keeps the wipe; it does
	// bring back T, which the broker still has, as RocketMQ's would.
	regA()
	if p := perm(); p != remoting.PermRead {
		t.Fatalf("perm after an unchanged registration: %d", p)
	}
	if _, code := route(t, c, "T"); code != remoting.Success {
		t.Fatal("the registration did not restore the queues of a topic the broker has")
	}
	resp = invoke(t, c, remoting.NewRequest(remoting.AddWritePermOfBroker, wipe.Encode(), nil))
	if rh, err := remoting.DecodeWritePermResponseHeader(remoting.AddWritePermOfBroker, resp.ExtFields); err != nil || rh.TopicCount != 2 {
		t.Fatalf("add: %+v %v", rh, err)
	}
	if p := perm(); p != remoting.PermRead|remoting.PermWrite {
		t.Fatalf("perm after add: %d", p)
	}
}

func TestRegisterTopicInNamesrv(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	c := dial(t, addr)
	mustRegister(t, c, with(a1, 0, 3, nil))
	reg := func(broker string) {
		t.Helper()
		h := remoting.RegisterTopicRequestHeader{Topic: "N"}
		rd := remoting.TopicRouteData{QueueDatas: []remoting.QueueData{{BrokerName: broker, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}}}
		body, _ := rd.Encode()
		if resp := invoke(t, c, remoting.NewRequest(remoting.RegisterTopicInNameServer, h.Encode(), body)); resp.Code != remoting.Success {
			t.Fatalf("217: %d %s", resp.Code, resp.Remark)
		}
	}
	reg("nobody")
	if _, code := route(t, c, "N"); code != remoting.TopicNotExist {
		t.Fatal("a topic of an unregistered broker name was routed")
	}
	reg("a")
	if rd, code := route(t, c, "N"); code != remoting.Success || rd.QueueDatas[0].ReadQueueNums != 2 {
		t.Fatalf("217 then 105: %d %+v", code, rd)
	}
}

func TestKVConfig(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	c := dial(t, addr)
	put := remoting.KVConfigRequestHeader{Namespace: remoting.OrderTopicConfigNamespace, Key: "T", Value: "a:4"}
	if resp := invoke(t, c, remoting.NewRequest(remoting.PutKVConfig, put.Encode(), nil)); resp.Code != remoting.Success {
		t.Fatalf("put: %d %s", resp.Code, resp.Remark)
	}
	get := remoting.KVConfigRequestHeader{Namespace: remoting.OrderTopicConfigNamespace, Key: "T"}
	if resp := invoke(t, c, remoting.NewRequest(remoting.GetKVConfig, get.Encode(), nil)); resp.Code != remoting.Success || resp.ExtFields["value"] != "a:4" {
		t.Fatalf("get: %d %v", resp.Code, resp.ExtFields)
	}
	// A registering broker gets the order-topic namespace back.
	resp := mustRegister(t, c, with(a1, 0, 3, nil))
	var kv remoting.KVTable
	if err := json.Unmarshal(resp.Body, &kv); err != nil || kv.Table["T"] != "a:4" {
		t.Fatalf("register answer body %s: %v", resp.Body, err)
	}
	ns := remoting.KVConfigRequestHeader{Namespace: remoting.OrderTopicConfigNamespace}
	if resp := invoke(t, c, remoting.NewRequest(remoting.GetKVListByNamespace, ns.Encode(), nil)); resp.Code != remoting.Success {
		t.Fatalf("list: %d", resp.Code)
	}
	invoke(t, c, remoting.NewRequest(remoting.DeleteKVConfig, get.Encode(), nil))
	if resp := invoke(t, c, remoting.NewRequest(remoting.GetKVConfig, get.Encode(), nil)); resp.Code != remoting.QueryNotFound {
		t.Fatalf("get after delete: %d", resp.Code)
	}
	if resp := invoke(t, c, remoting.NewRequest(remoting.GetKVListByNamespace, ns.Encode(), nil)); resp.Code != remoting.QueryNotFound {
		t.Fatalf("list after delete: %d", resp.Code)
	}
	if resp := invoke(t, c, remoting.NewRequest(remoting.PutKVConfig, get.Encode(), nil)); resp.Code != remoting.InvalidParameter {
		t.Fatalf("put without a value: %d", resp.Code)
	}
}

func TestQueryDataVersion(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	c := dial(t, addr)
	r := &Registrar{versions: map[regKey]*version{}}
	req, _ := r.registerRequest(with(a1, 0, 3, topics("T")))
	invoke(t, c, req)
	sent := r.versions[regKey{"a", a1.BrokerAddr}].dv
	query := func(dv remoting.DataVersion) (bool, remoting.DataVersion) {
		t.Helper()
		h := remoting.UnregisterBrokerRequestHeader{BrokerName: "a", BrokerAddr: a1.BrokerAddr, ClusterName: "c"}
		body, _ := json.Marshal(dv)
		resp := invoke(t, c, remoting.NewRequest(remoting.QueryDataVersion, h.Encode(), body))
		rh, err := remoting.DecodeQueryDataVersionResponseHeader(resp.ExtFields)
		var held remoting.DataVersion
		if err == nil {
			err = json.Unmarshal(resp.Body, &held)
		}
		if err != nil {
			t.Fatal(err)
		}
		return rh.Changed, held
	}
	if changed, held := query(sent); changed || held != sent {
		t.Fatalf("same version: changed %v, held %+v, sent %+v", changed, held, sent)
	}
	newer := sent
	newer.Counter++
	if changed, _ := query(newer); !changed {
		t.Fatal("a newer version is not a change")
	}
}

func TestRefusals(t *testing.T) {
	_, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	c := dial(t, addr)
	resp := invoke(t, c, remoting.NewRequest(remoting.SendMessage, nil, nil))
	if resp.Code != remoting.RequestCodeNotSupported || resp.Remark != " request type 10 not supported" {
		t.Fatalf("unknown code answered %d %q", resp.Code, resp.Remark)
	}
	// A body that does not match its checksum.
	r := &Registrar{versions: map[regKey]*version{}}
	req, _ := r.registerRequest(with(a1, 0, 3, topics("T")))
	req.Body = append(req.Body[:len(req.Body):len(req.Body)], ' ')
	if resp := invoke(t, c, req); resp.Code != remoting.SystemError || resp.Remark != "crc32 not match" {
		t.Fatalf("bad checksum answered %d %q", resp.Code, resp.Remark)
	}
	// Without a checksum the same body is fine.
	req, _ = r.registerRequest(with(a1, 0, 3, topics("T")))
	req.ExtFields["bodyCrc32"] = "0"
	req.Body = append(req.Body[:len(req.Body):len(req.Body)], ' ')
	if resp := invoke(t, c, req); resp.Code != remoting.Success {
		t.Fatalf("unchecked body answered %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(t, c, remoting.NewRequest(remoting.RegisterBroker, map[string]string{"brokerName": "a"}, nil)); resp.Code != remoting.InvalidParameter {
		t.Fatalf("a registration without brokerAddr answered %d", resp.Code)
	}
	if resp := invoke(t, c, remoting.NewRequest(remoting.UpdateNamesrvConfig, nil, []byte("a=b\n"))); resp.Code != remoting.NoPermission {
		t.Fatalf("318 answered %d", resp.Code)
	}
	if resp := invoke(t, c, remoting.NewRequest(remoting.GetNamesrvConfig, nil, nil)); resp.Code != remoting.Success || !strings.Contains(string(resp.Body), "scanNotActiveBrokerInterval=3600000\n") {
		t.Fatalf("319 answered %d %q", resp.Code, resp.Body)
	}
}
