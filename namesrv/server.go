// Package namesrv is raftmq's name server, compatible with RocketMQ's: the
// place clients ask which brokers serve a topic, and brokers tell what
// they serve.
//
// # Model
//
// A broker name (a raftmq raft group) has addresses by broker id: id 0 is
// the master, to which producers write (in raftmq, the raft leader); the
// other nodes register under their node ids. A topic's route lists, for
// every broker name that serves it, its queues (from the master's
// registration: the queues a follower reports are ignored) and the broker
// name's addresses.
//
// Brokers register every 30 s and at once when something changes (a new
// leader, a topic created or deleted). A registration lives Expiry (120 s
// by default, or the broker's heartbeatTimeoutMillis) without renewal, and
// ends at once when the connection it came on closes or the broker
// unregisters. When an address registers under a new id of its broker name
// (a follower that became leader, or the reverse), its old id is dropped
// first. raftmq brokers send their raft term as dataVersion.stateVersion;
// a registration claiming id 0 with a lower term than the live master at
// another address is refused, so a deposed leader that still runs cannot
// take the master's place back.
//
// One mutex guards the tables; the clock is injected (Config.Now) so that
// expiry is tested without waiting.
package namesrv

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/raftmq/raftmq/internal/remoting"
	"github.com/raftmq/raftmq/offsets"
)

// DefaultExpiry is how long a registration lives without renewal.
const DefaultExpiry = 120 * time.Second

// Config configures a Server.
type Config struct {
	// Expiry: see DefaultExpiry.
	Expiry time.Duration
	// Now is the clock (time.Now if nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// Server is a name server's state and request handler. Serve it with a
// remoting.Server whose Handler is Handle, and call Expire periodically
// (Run does both).
type Server struct {
	expiry time.Duration
	now    func() time.Time
	log    *slog.Logger

	mu      sync.Mutex
	brokers map[string]*brokerEntry           // broker name -> entry
	topics  map[string]map[string]queueConfig // topic -> broker name -> queues
	live    map[liveKey]*liveEntry
	watched map[*remoting.ServerConn]bool
	refused remoting.Refusals
}

type brokerEntry struct {
	cluster string
	addrs   map[int64]string // broker id -> address
}

type queueConfig struct {
	read, write, perm, sysFlag int32
}

type liveKey struct{ broker, addr string }

type liveEntry struct {
	id           int64
	cluster      string
	stateVersion int64
	last         time.Time
	timeout      time.Duration
	conn         *remoting.ServerConn
}

// New returns an empty name server.
func New(cfg Config) *Server {
	if cfg.Expiry <= 0 {
		cfg.Expiry = DefaultExpiry
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{expiry: cfg.Expiry, now: cfg.Now, log: cfg.Logger,
		brokers: map[string]*brokerEntry{}, topics: map[string]map[string]queueConfig{},
		live: map[liveKey]*liveEntry{}, watched: map[*remoting.ServerConn]bool{}}
}

// Handle answers one request (a remoting.Handler).
func (s *Server) Handle(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	switch req.Code {
	case remoting.RegisterBroker:
		return s.register(conn, req)
	case remoting.UnregisterBroker:
		h, err := remoting.DecodeUnregisterBrokerRequestHeader(req.ExtFields)
		if err != nil {
			return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
		}
		s.mu.Lock()
		s.dropLocked(liveKey{h.BrokerName, h.BrokerAddr}, "unregistered")
		s.mu.Unlock()
		return remoting.NewResponse(req, remoting.Success, "")
	case remoting.GetRouteInfoByTopic:
		h, err := remoting.DecodeGetRouteInfoRequestHeader(req.ExtFields)
		if err != nil {
			return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
		}
		rd, ok := s.Route(h.Topic)
		if !ok {
			return remoting.NewResponse(req, remoting.TopicNotExist, "No topic route info in name server for the topic: "+h.Topic)
		}
		return jsonResponse(req, &rd)
	case remoting.GetBrokerClusterInfo:
		return jsonResponse(req, s.ClusterInfo())
	case remoting.GetAllTopicListFromNameServer:
		return jsonResponse(req, remoting.TopicList{TopicList: s.Topics("")})
	case remoting.GetTopicsByCluster:
		return jsonResponse(req, remoting.TopicList{TopicList: s.Topics(req.ExtFields["cluster"])})
	case remoting.DeleteTopicInNameServer:
		topic := req.ExtFields["topic"]
		if topic == "" {
			return s.refuse(conn, req, remoting.InvalidParameter, "delete topic: ext field topic is required")
		}
		s.mu.Lock()
		delete(s.topics, topic)
		s.mu.Unlock()
		return remoting.NewResponse(req, remoting.Success, "")
	}
	return s.refuse(conn, req, remoting.RequestCodeNotSupported, fmt.Sprintf("request code %d not supported by the name server", req.Code))
}

func jsonResponse(req *remoting.Command, v any) *remoting.Command {
	body, err := json.Marshal(v)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// refuse answers with an error and logs it once per client host and code.
func (s *Server) refuse(conn *remoting.ServerConn, req *remoting.Command, code int32, remark string) *remoting.Command {
	if addr, first := s.refused.First(conn, req, code); first {
		s.log.Warn("namesrv: request refused (logged once per client host and code)", "client", addr, "code", req.Code, "answer", code, "remark", remark)
	}
	return remoting.NewResponse(req, code, remark)
}

func (s *Server) register(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeRegisterBrokerRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	if h.BodyCRC32 != 0 && remoting.BodyCRC32(req.Body) != h.BodyCRC32 {
		return s.refuse(conn, req, remoting.SystemError, "register broker: body checksum mismatch")
	}
	var body remoting.RegisterBrokerBody
	if len(req.Body) > 0 {
		if err := remoting.DecodeJSON(req.Body, &body); err != nil {
			return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
		}
	}
	topics := map[string]queueConfig{}
	for name, raw := range body.TopicConfigSerializeWrapper.TopicConfigTable {
		var tc offsets.TopicConfig
		if err := json.Unmarshal(raw, &tc); err != nil {
			return s.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("register broker: topic %s: %v", name, err))
		}
		topics[name] = queueConfig{read: tc.ReadQueueNums, write: tc.WriteQueueNums, perm: tc.Perm, sysFlag: tc.TopicSysFlag}
	}
	version := body.TopicConfigSerializeWrapper.DataVersion.StateVersion
	now := s.now()

	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.brokers[h.BrokerName]
	if h.BrokerID == remoting.MasterID && b != nil {
		if cur, ok := b.addrs[remoting.MasterID]; ok && cur != h.BrokerAddr {
			if le := s.live[liveKey{h.BrokerName, cur}]; le != nil && le.stateVersion > version {
				return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf(
					"register broker: %s claims master of %s with state version %d, but %s holds it with %d", h.BrokerAddr, h.BrokerName, version, cur, le.stateVersion))
			}
		}
	}
	if b == nil {
		b = &brokerEntry{addrs: map[int64]string{}}
		s.brokers[h.BrokerName] = b
	}
	b.cluster = h.ClusterName
	for id, a := range b.addrs {
		if a == h.BrokerAddr && id != h.BrokerID {
			delete(b.addrs, id) // the address moved to another id
		}
	}
	if old, ok := b.addrs[h.BrokerID]; ok && old != h.BrokerAddr && h.BrokerID == remoting.MasterID {
		// The old master's address stays registered, but not as master:
		// its own next registration says what it is now.
		delete(b.addrs, h.BrokerID)
	}
	b.addrs[h.BrokerID] = h.BrokerAddr
	timeout := s.expiry
	if h.HeartbeatTimeoutMillis > 0 {
		timeout = time.Duration(h.HeartbeatTimeoutMillis) * time.Millisecond
	}
	s.live[liveKey{h.BrokerName, h.BrokerAddr}] = &liveEntry{id: h.BrokerID, cluster: h.ClusterName, stateVersion: version, last: now, timeout: timeout, conn: conn}
	if h.BrokerID == remoting.MasterID {
		for t, qs := range s.topics {
			if _, ok := topics[t]; !ok {
				delete(qs, h.BrokerName)
				if len(qs) == 0 {
					delete(s.topics, t)
				}
			}
		}
		for t, q := range topics {
			if s.topics[t] == nil {
				s.topics[t] = map[string]queueConfig{}
			}
			s.topics[t][h.BrokerName] = q
		}
	}
	if conn != nil && !s.watched[conn] {
		s.watched[conn] = true
		go s.watch(conn)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"haServerAddr": h.HAServerAddr, "masterAddr": b.addrs[remoting.MasterID]}
	return resp
}

// watch drops the registrations made over conn when it closes.
func (s *Server) watch(conn *remoting.ServerConn) {
	<-conn.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watched, conn)
	for k, le := range s.live {
		if le.conn == conn {
			s.dropLocked(k, "connection closed")
		}
	}
}

// dropLocked forgets one registration: the address leaves its broker
// name, and a broker name left without addresses leaves every route.
func (s *Server) dropLocked(k liveKey, why string) {
	le, ok := s.live[k]
	if !ok {
		return
	}
	delete(s.live, k)
	s.log.Info("namesrv: broker registration dropped", "broker", k.broker, "addr", k.addr, "id", le.id, "why", why)
	b := s.brokers[k.broker]
	if b == nil {
		return
	}
	for id, a := range b.addrs {
		if a == k.addr {
			delete(b.addrs, id)
		}
	}
	if _, master := b.addrs[remoting.MasterID]; !master && le.id == remoting.MasterID {
		// No master: the broker name's queues go until one registers,
		// so producers stop choosing it. Followers still serve pulls of
		// what the route had; a new master brings the queues back.
		for t, qs := range s.topics {
			delete(qs, k.broker)
			if len(qs) == 0 {
				delete(s.topics, t)
			}
		}
	}
	if len(b.addrs) == 0 {
		delete(s.brokers, k.broker)
	}
}

// Expire drops registrations not renewed within their timeout.
func (s *Server) Expire() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, le := range s.live {
		if now.Sub(le.last) > le.timeout {
			s.dropLocked(k, "expired")
		}
	}
}

// Route returns a topic's route: its queues on every broker name that
// serves it, and those broker names' addresses, in broker-name order.
func (s *Server) Route(topic string) (remoting.TopicRouteData, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs := s.topics[topic]
	if len(qs) == 0 {
		return remoting.TopicRouteData{}, false
	}
	names := make([]string, 0, len(qs))
	for n := range qs {
		names = append(names, n)
	}
	sort.Strings(names)
	var rd remoting.TopicRouteData
	for _, n := range names {
		b := s.brokers[n]
		if b == nil {
			continue
		}
		q := qs[n]
		rd.QueueDatas = append(rd.QueueDatas, remoting.QueueData{BrokerName: n, ReadQueueNums: int(q.read), WriteQueueNums: int(q.write), Perm: int(q.perm), TopicSysFlag: int(q.sysFlag)})
		addrs := make(map[int64]string, len(b.addrs))
		for id, a := range b.addrs {
			addrs[id] = a
		}
		rd.BrokerDatas = append(rd.BrokerDatas, remoting.BrokerData{Cluster: b.cluster, BrokerName: n, BrokerAddrs: addrs})
	}
	return rd, len(rd.QueueDatas) > 0
}

// ClusterInfo returns every broker name with its addresses, and every
// cluster with its broker names.
func (s *Server) ClusterInfo() remoting.ClusterInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	ci := remoting.ClusterInfo{BrokerAddrTable: map[string]remoting.BrokerData{}, ClusterAddrTable: map[string][]string{}}
	for n, b := range s.brokers {
		addrs := make(map[int64]string, len(b.addrs))
		for id, a := range b.addrs {
			addrs[id] = a
		}
		ci.BrokerAddrTable[n] = remoting.BrokerData{Cluster: b.cluster, BrokerName: n, BrokerAddrs: addrs}
		ci.ClusterAddrTable[b.cluster] = append(ci.ClusterAddrTable[b.cluster], n)
	}
	for _, ns := range ci.ClusterAddrTable {
		sort.Strings(ns)
	}
	return ci
}

// Topics returns the topics with a route, sorted; with cluster set, only
// those served by a broker name of that cluster.
func (s *Server) Topics(cluster string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for t, qs := range s.topics {
		keep := cluster == ""
		for n := range qs {
			if b := s.brokers[n]; b != nil && b.cluster == cluster {
				keep = true
			}
		}
		if keep {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// Serve answers requests on ln and expires registrations every scan
// (5 s if 0) until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener, scan time.Duration) error {
	if scan <= 0 {
		scan = 5 * time.Second
	}
	srv := &remoting.Server{Handler: s.Handle, Logger: s.log}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	t := time.NewTicker(scan)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.Expire()
		case err := <-errc:
			srv.Close()
			return err
		case <-ctx.Done():
			srv.Close()
			<-errc
			return nil
		}
	}
}
