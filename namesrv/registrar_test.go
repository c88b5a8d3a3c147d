package namesrv

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// state is a Registrar's State function the test changes.
type state struct {
	mu   sync.Mutex
	regs []Registration
}

func (s *state) get() []Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Registration(nil), s.regs...)
}

func (s *state) set(regs ...Registration) {
	s.mu.Lock()
	s.regs = regs
	s.mu.Unlock()
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestRegistrar(t *testing.T) {
	s, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	st := &state{}
	g := Registration{Cluster: "c", BrokerName: "g", BrokerAddr: "10.0.0.9:10911", StateVersion: 1, Topics: topics("T")}
	st.set(g)
	// A dead name server first in the list must not hold up the live one.
	r := NewRegistrar(RegistrarConfig{Addrs: []string{deadAddr(t), addr}, Interval: time.Hour, State: st.get, Logger: testLogger(t)})
	defer r.Close()
	eventually(t, "first registration", func() bool { _, ok := s.Route("T"); return ok })

	// A topic created: visible within a second of Trigger.
	g.Topics = topics("T", "U")
	st.set(g)
	start := time.Now()
	r.Trigger()
	eventually(t, "a triggered registration", func() bool { _, ok := s.Route("U"); return ok })
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the triggered registration took %v", took)
	}
	// A topic deleted: the full table leaves it out, and it leaves the route.
	g.Topics = topics("U")
	st.set(g)
	r.Trigger()
	eventually(t, "a deleted topic's route", func() bool { _, ok := s.Route("T"); return !ok })

	// Leadership moves away: id 2, and another node registers id 0.
	g.BrokerID, g.StateVersion = 2, 2
	st.set(g)
	r.Trigger()
	eventually(t, "the follower registration", func() bool {
		rd, _ := s.Route("U")
		return rd.BrokerDatas[0].BrokerAddrs[2] == g.BrokerAddr
	})

	// A second broker name appears, then goes: it is unregistered.
	f := Registration{Cluster: "c", BrokerName: "g@2", BrokerAddr: g.BrokerAddr, StateVersion: 2, Topics: topics("U")}
	st.set(g, f)
	r.Trigger()
	eventually(t, "the second broker name", func() bool { rd, _ := s.Route("U"); return len(rd.BrokerDatas) == 2 })
	st.set(g)
	r.Trigger()
	eventually(t, "the second broker name's unregistration", func() bool { rd, _ := s.Route("U"); return len(rd.BrokerDatas) == 1 })

	r.Close()
	if _, ok := s.Route("U"); ok {
		t.Fatal("Close did not unregister")
	}
	r.Close() // a second Close does nothing
}

func TestRegistrarDataVersion(t *testing.T) {
	r := &Registrar{versions: map[regKey]*version{}}
	reg := Registration{Cluster: "c", BrokerName: "g", BrokerAddr: "10.0.0.9:10911", StateVersion: 4, Topics: topics("T", "U")}
	dv := func() remoting.DataVersion {
		t.Helper()
		req, err := r.registerRequest(reg)
		if err != nil {
			t.Fatal(err)
		}
		h, err := remoting.DecodeRegisterBrokerRequestHeader(req.ExtFields)
		if err != nil || !h.FullTopicTable || h.BodyCRC32 != remoting.BodyCRC32(req.Body) || h.HAServerAddr != reg.BrokerAddr {
			t.Fatalf("header %+v: %v", h, err)
		}
		var body remoting.RegisterBrokerBody
		if err := remoting.DecodeJSON(req.Body, &body); err != nil {
			t.Fatal(err)
		}
		return body.TopicConfigSerializeWrapper.DataVersion
	}
	first := dv()
	if first.StateVersion != 4 || first.Counter != 1 {
		t.Fatalf("first version %+v", first)
	}
	reg.Topics = topics("U", "T") // same table, another order
	if v := dv(); v != first {
		t.Fatalf("unchanged registration got version %+v, had %+v", v, first)
	}
	reg.BrokerID = 1
	if v := dv(); v.Counter != 2 {
		t.Fatalf("a new broker id kept version %+v", v)
	}
	reg.Topics = topics("U")
	if v := dv(); v.Counter != 3 {
		t.Fatalf("a new topic table kept version %+v", v)
	}
}

// TestRegistrarReconnects: when the connection to a name server breaks,
// the name server drops the registration and the Registrar makes it again
// over a new connection, without waiting for its interval.
func TestRegistrarReconnects(t *testing.T) {
	s, addr := serve(t, &fakeClock{t: time.Unix(1000, 0)})
	st := &state{}
	st.set(Registration{Cluster: "c", BrokerName: "g", BrokerAddr: "10.0.0.9:10911", Topics: topics("T")})
	r := NewRegistrar(RegistrarConfig{Addrs: []string{addr}, Interval: time.Hour, State: st.get, Logger: testLogger(t)})
	defer r.Close()
	eventually(t, "first registration", func() bool { _, ok := s.Route("T"); return ok })

	s.mu.Lock()
	var conns []*remoting.ServerConn
	for c := range s.mu.watched {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if len(conns) != 1 {
		t.Fatalf("%d watched connections", len(conns))
	}
	conns[0].Close()
	eventually(t, "the registration made again", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, old := s.mu.watched[conns[0]]
		return !old && len(s.mu.watched) == 1
	})
	if _, ok := s.Route("T"); !ok {
		t.Fatal("not routed after the reconnection")
	}
}

func TestParseAddrs(t *testing.T) {
	if got := ParseAddrs(" a:1;b:2,, ;c:3"); len(got) != 3 || got[0] != "a:1" || got[2] != "c:3" {
		t.Fatalf("ParseAddrs: %q", got)
	}
	t.Setenv("NAMESRV_ADDR", "e:1;f:2")
	if got := AddrsFromEnv(""); len(got) != 2 || got[1] != "f:2" {
		t.Fatalf("from the environment: %q", got)
	}
	if got := AddrsFromEnv("g:3"); len(got) != 1 || got[0] != "g:3" {
		t.Fatalf("the flag over the environment: %q", got)
	}
}
