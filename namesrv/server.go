package namesrv

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// DefaultExpiry is how long a registration lives without renewal, as in
// RocketMQ.
const DefaultExpiry = 120 * time.Second

// DefaultScanInterval is how often Serve drops expired registrations when
// its scan argument is 0, as in RocketMQ.
const DefaultScanInterval = 5 * time.Second

// Config configures a Server.
type Config struct {
	// Expiry is how long a registration lives without renewal when the
	// broker does not send heartbeatTimeoutMillis (DefaultExpiry if 0).
	Expiry time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Logger gets registrations, expiries and refusals (discarded if nil).
	Logger *slog.Logger
	// TLS, if set, is the certificate Serve's port offers, and TLSMode
	// which connections it takes (RocketMQ's disabled, permissive,
	// enforcing; the first byte decides), as on a broker's client port.
	TLS     *tls.Config
	TLSMode remoting.TLSMode
}

// Server is a name server's state and request handler. Serve runs it on a
// listener; Handle and Expire let it run on a remoting.Server of the
// caller's.
type Server struct {
	expiry time.Duration
	now    func() time.Time
	log    *slog.Logger
	// tls and tlsMode are Serve's port's TLS (Config.TLS, Config.TLSMode).
	tls     *tls.Config
	tlsMode remoting.TLSMode

	mu struct {
		sync.Mutex
		t       table
		watched map[*remoting.ServerConn]struct{} // connections a watcher waits on
		scan    time.Duration                     // Serve's scan interval, for GET_NAMESRV_CONFIG
		listen  string                            // Serve's listener address, likewise
	}
	refused remoting.Refusals
	wg      sync.WaitGroup // connection watchers
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
	s := &Server{expiry: cfg.Expiry, now: cfg.Now, log: cfg.Logger, tls: cfg.TLS, tlsMode: cfg.TLSMode}
	s.mu.t = newTable()
	s.mu.watched = map[*remoting.ServerConn]struct{}{}
	return s
}

// Serve answers requests on ln and drops expired registrations every scan
// (DefaultScanInterval if 0) until ctx ends or ln fails. It closes ln and
// every connection before it returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener, scan time.Duration) error {
	if scan <= 0 {
		scan = DefaultScanInterval
	}
	s.mu.Lock()
	s.mu.scan, s.mu.listen = scan, ln.Addr().String()
	s.mu.Unlock()
	srv := &remoting.Server{Handler: s.Handle, Logger: s.log, TLS: s.tls, TLSMode: s.tlsMode}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	t := time.NewTicker(scan)
	defer t.Stop()
	var err error
loop:
	for {
		select {
		case <-t.C:
			s.Expire()
		case err = <-errc:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	cerr := srv.Close()
	if err == nil {
		err = <-errc
	}
	s.wg.Wait() // the watchers end with their connections
	return errors.Join(err, cerr)
}

// Handle answers one request; it is a remoting.Handler.
func (s *Server) Handle(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	switch req.Code {
	case remoting.RegisterBroker:
		return s.handleRegister(conn, req)
	case remoting.UnregisterBroker:
		return s.handleUnregister(conn, req)
	case remoting.QueryDataVersion:
		return s.handleQueryDataVersion(conn, req)
	case remoting.BrokerHeartbeat:
		return s.handleBrokerHeartbeat(conn, req)
	case remoting.GetRouteInfoByTopic:
		return s.handleRoute(conn, req)
	case remoting.GetBrokerClusterInfo:
		return jsonResponse(req, s.ClusterInfo())
	case remoting.GetAllTopicListFromNameServer, remoting.GetTopicsByCluster, remoting.GetSystemTopicListFromNS,
		remoting.GetUnitTopicList, remoting.GetHasUnitSubTopicList, remoting.GetHasUnitSubUnUnitTopicList:
		return s.handleTopicList(conn, req)
	case remoting.DeleteTopicInNameServer:
		return s.handleDeleteTopic(conn, req)
	case remoting.RegisterTopicInNameServer:
		return s.handleRegisterTopic(conn, req)
	case remoting.WipeWritePermOfBroker, remoting.AddWritePermOfBroker:
		return s.handleWritePerm(conn, req)
	case remoting.PutKVConfig, remoting.GetKVConfig, remoting.DeleteKVConfig, remoting.GetKVListByNamespace:
		return s.handleKV(conn, req)
	case remoting.GetNamesrvConfig:
		return s.handleGetConfig(req)
	case remoting.UpdateNamesrvConfig:
		return s.refuse(conn, req, remoting.NoPermission,
			"raftmq's name server takes its settings from command-line flags at start; they cannot be changed while it runs")
	}
	return s.refuse(conn, req, remoting.RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", req.Code))
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

// refuse answers with an error and logs it once per client host, code
// and answer.
func (s *Server) refuse(conn *remoting.ServerConn, req *remoting.Command, code int32, remark string) *remoting.Command {
	if addr, first := s.refused.First(conn, req, code); first {
		s.log.Warn("namesrv: request refused (logged once per client host and code)", "client", addr, "code", req.Code, "answer", code, "remark", remark)
	}
	return remoting.NewResponse(req, code, remark)
}

func (s *Server) handleRegister(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeRegisterBrokerRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	if h.BodyCRC32 != 0 && remoting.BodyCRC32(req.Body) != h.BodyCRC32 {
		return s.refuse(conn, req, remoting.SystemError, "crc32 not match")
	}
	r, err := s.decodeRegistration(h, req.Body)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	if conn != nil {
		r.conn = conn
	}
	s.mu.Lock()
	res, err := s.mu.t.register(s.now(), r)
	order := s.mu.t.kv[remoting.OrderTopicConfigNamespace]
	var body []byte
	if err == nil && len(order) > 0 {
		body, _ = json.Marshal(remoting.KVTable{Table: order}) // a map of strings always marshals
	}
	if err == nil && conn != nil {
		s.watchLocked(conn)
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("namesrv: registration refused", "broker", r.broker, "addr", r.addr, "id", r.id, "err", err)
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if res.first {
		s.log.Info("namesrv: broker registered", "cluster", r.cluster, "broker", r.broker, "addr", r.addr, "id", r.id, "stateVersion", r.version.StateVersion)
	}
	if res.displaced != "" {
		s.log.Info("namesrv: broker id taken over", "broker", r.broker, "id", r.id, "addr", r.addr, "previous", res.displaced, "stateVersion", r.version.StateVersion)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.RegisterBrokerResponseHeader{HAServerAddr: res.masterHA, MasterAddr: res.master}
	resp.ExtFields = rh.Encode()
	resp.Body = body
	return resp
}

// decodeRegistration decodes a REGISTER_BROKER body. A request without a
// body (RocketMQ allows it) renews the registration and carries no topics.
func (s *Server) decodeRegistration(h remoting.RegisterBrokerRequestHeader, body []byte) (registration, error) {
	r := registration{cluster: h.ClusterName, broker: h.BrokerName, addr: h.BrokerAddr, ha: h.HAServerAddr,
		id: h.BrokerID, timeout: s.expiry, full: h.FullTopicTable}
	if h.HeartbeatTimeoutMillis > 0 {
		r.timeout = time.Duration(h.HeartbeatTimeoutMillis) * time.Millisecond
	}
	if h.BrokerName == "" || h.BrokerAddr == "" || h.BrokerID < 0 {
		return r, fmt.Errorf("register broker: brokerName %q, brokerAddr %q, brokerId %d: need a name, an address and an id >= 0",
			h.BrokerName, h.BrokerAddr, h.BrokerID)
	}
	if len(body) == 0 {
		return r, nil
	}
	var rb remoting.RegisterBrokerBody
	if err := remoting.DecodeJSON(body, &rb); err != nil {
		return r, fmt.Errorf("register broker: %w", err)
	}
	w := rb.TopicConfigSerializeWrapper
	r.version = w.DataVersion
	r.topics = make(map[string]queueConfig, len(w.TopicConfigTable))
	for name, raw := range w.TopicConfigTable {
		var tc offsets.TopicConfig
		if err := json.Unmarshal(raw, &tc); err != nil {
			return r, fmt.Errorf("register broker: topic %q: %w", name, err)
		}
		r.topics[name] = queueConfig{read: tc.ReadQueueNums, write: tc.WriteQueueNums, perm: tc.Perm, sysFlag: tc.TopicSysFlag}
	}
	return r, nil
}

// watchLocked starts, once per connection, a watcher that drops the
// registrations made over conn when it closes.
func (s *Server) watchLocked(conn *remoting.ServerConn) {
	if _, ok := s.mu.watched[conn]; ok {
		return
	}
	s.mu.watched[conn] = struct{}{}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-conn.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.mu.watched, conn)
		for _, k := range s.mu.t.onConn(conn) {
			s.dropLocked(k, "connection closed")
		}
	}()
}

func (s *Server) dropLocked(k liveKey, why string) {
	if le := s.mu.t.drop(k); le != nil {
		s.log.Info("namesrv: broker registration dropped", "broker", k.broker, "addr", k.addr, "id", le.id, "why", why)
	}
}

func (s *Server) handleUnregister(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeUnregisterBrokerRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	s.mu.Lock()
	s.dropLocked(liveKey{h.BrokerName, h.BrokerAddr}, "unregistered")
	s.mu.Unlock()
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleQueryDataVersion answers whether the broker's data version (the
// body) differs from the one registered, and renews the registration.
func (s *Server) handleQueryDataVersion(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeUnregisterBrokerRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	var dv remoting.DataVersion
	if err := remoting.DecodeJSON(req.Body, &dv); err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	k := liveKey{h.BrokerName, h.BrokerAddr}
	s.mu.Lock()
	var held *remoting.DataVersion
	if le := s.mu.t.live[k]; le != nil {
		v := le.version
		held = &v
	}
	s.mu.t.touch(s.now(), k)
	s.mu.Unlock()
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.QueryDataVersionResponseHeader{Changed: held == nil || *held != dv}
	resp.ExtFields = rh.Encode()
	if held != nil {
		resp.Body, _ = json.Marshal(held) // three integers always marshal
	}
	return resp
}

func (s *Server) handleBrokerHeartbeat(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeBrokerHeartbeatRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	s.mu.Lock()
	s.mu.t.touch(s.now(), liveKey{h.BrokerName, h.BrokerAddr})
	s.mu.Unlock()
	return remoting.NewResponse(req, remoting.Success, "")
}

func (s *Server) handleRoute(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeGetRouteInfoRequestHeader(req.ExtFields)
	if err != nil {
		return s.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	rd, ok := s.Route(h.Topic)
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, "No topic route info in name server for the topic: "+h.Topic)
	}
	body, err := rd.Encode() // compact, brokerAddrs always present
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// Expire drops the registrations not renewed within their timeout; Serve
// calls it every scan interval.
func (s *Server) Expire() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.mu.t.expired(now) {
		s.dropLocked(k, "expired")
	}
}

// Route returns a topic's route: its queues on every broker name that
// serves it, and those broker names' addresses, in broker-name order. It
// returns false if no broker name serves the topic.
func (s *Server) Route(topic string) (remoting.TopicRouteData, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.t.route(topic)
}

// ClusterInfo returns every broker name with its addresses, and every
// cluster with its broker names (sorted).
func (s *Server) ClusterInfo() remoting.ClusterInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.t.clusterInfo()
}

// Topics returns the topics with a route, sorted; with cluster set, only
// those a broker name of that cluster serves.
func (s *Server) Topics(cluster string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.t.topicList(func(qs map[string]queueConfig) bool {
		return cluster == "" || s.mu.t.inCluster(cluster, qs)
	})
}
