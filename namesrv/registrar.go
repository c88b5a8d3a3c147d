package namesrv

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// DefaultRegisterInterval is how often a broker registers, as RocketMQ's.
const DefaultRegisterInterval = 30 * time.Second

// DefaultRegisterTimeout bounds one request to one name server.
const DefaultRegisterTimeout = 3 * time.Second

// minRoundGap is the least time between the starts of two registration
// rounds: triggers that arrive closer together share a round.
const minRoundGap = 50 * time.Millisecond

// Registration is what a broker tells the name servers about one broker
// name it serves.
type Registration struct {
	Cluster, BrokerName, BrokerAddr string
	// BrokerID is 0 while the node is the raft leader (and has applied
	// what its predecessors committed), its node id otherwise.
	BrokerID int64
	// HAServerAddr is sent as haServerAddr; BrokerAddr if empty (raftmq
	// replicates over raft, not over RocketMQ's HA port).
	HAServerAddr string
	// StateVersion is sent as dataVersion.stateVersion: raftmq sends its
	// raft term, so that a name server refuses a deposed leader's claim to
	// id 0 while its successor is registered.
	StateVersion int64
	// Topics is the broker name's whole topic table.
	Topics []offsets.TopicConfig
}

// RegistrarConfig configures a Registrar.
type RegistrarConfig struct {
	// Addrs are the name servers (see ParseAddrs and AddrsFromEnv).
	Addrs []string
	// State returns what to register now: one Registration per broker
	// name (a raftmq node may register its group's name and a failover
	// name). It is called on the Registrar's goroutine, once per round.
	State func() []Registration
	// Interval between rounds (DefaultRegisterInterval if 0).
	Interval time.Duration
	// Timeout of one request to one name server (DefaultRegisterTimeout
	// if 0).
	Timeout time.Duration
	Logger  *slog.Logger
	// Dial opens connections to the name servers; nil uses a net.Dialer.
	// A node whose client port enforces TLS dials them over TLS.
	Dial remoting.DialFunc
}

// Registrar keeps a broker registered with its name servers: it registers
// with every one at start, every Interval, at once after Trigger, and again
// when a connection to a name server breaks (the name server dropped the
// registrations made over it). A broker name it registered and State no
// longer returns is unregistered. Close unregisters everything.
//
// One goroutine runs the rounds and owns the Registrar's state; a round
// sends to the name servers in parallel, so a dead one delays the others
// by nothing.
type Registrar struct {
	cfg     RegistrarConfig
	trigger chan struct{} // capacity 1: pending triggers merge
	stop    chan struct{}
	done    chan struct{} // closed when run returns
	once    sync.Once     // Close

	links []*nsLink // one per name server

	// Owned by run's goroutine, then by Close once done is closed.
	last     []Registration
	versions map[regKey]*version

	watchers sync.WaitGroup // connection watchers
}

// regKey names one registration: a broker name at an address.
type regKey struct{ broker, addr string }

// version is the data version sent for one registration. It changes only
// when what is registered changes, so a name server keeps an admin's
// write-permission changes between unchanged registrations.
type version struct {
	fingerprint string // id, state version and topic table last sent
	dv          remoting.DataVersion
}

// nsLink is the connection to one name server. During a round it belongs
// to that round's goroutine for its name server.
type nsLink struct {
	addr string
	conn *remoting.Conn
	// ours is set before the Registrar closes conn itself, so that its
	// watcher does not start a round for it.
	ours    *atomic.Bool
	failing bool // the last request failed (logged once until it works)
}

// drop closes the link's connection, if any.
func (l *nsLink) drop() {
	if l.conn != nil {
		l.ours.Store(true)
		_ = l.conn.Abort() // a late answer must not arrive on a reused connection
		l.conn = nil
	}
}

// NewRegistrar starts a Registrar; its first round starts at once.
func NewRegistrar(cfg RegistrarConfig) *Registrar {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultRegisterInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRegisterTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Registrar{cfg: cfg, trigger: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		versions: map[regKey]*version{}}
	for _, a := range cfg.Addrs {
		r.links = append(r.links, &nsLink{addr: a})
	}
	go r.run()
	return r
}

// Trigger asks for a round now, for example on a leader change or a topic
// change. It never blocks; triggers that arrive before the round starts
// merge into it.
func (r *Registrar) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Close stops the rounds, unregisters what the last round registered from
// every name server, and closes the connections. Calls after the first do
// nothing.
func (r *Registrar) Close() {
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		var reqs []*remoting.Command
		for _, reg := range r.last {
			reqs = append(reqs, unregisterRequest(reg))
		}
		r.eachServer(func(l *nsLink) { r.send(l, reqs) })
		for _, l := range r.links {
			l.drop()
		}
		r.watchers.Wait()
	})
}

func (r *Registrar) run() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		start := time.Now()
		r.round()
		select {
		case <-t.C:
		case <-r.trigger:
			if wait := minRoundGap - time.Since(start); wait > 0 {
				select {
				case <-time.After(wait):
				case <-r.stop:
					return
				}
			}
		case <-r.stop:
			return
		}
	}
}

// round registers State's registrations with every name server, and
// unregisters those of the previous round State no longer returns.
func (r *Registrar) round() {
	regs := r.cfg.State()
	var reqs []*remoting.Command
	seen := map[regKey]bool{}
	for _, reg := range regs {
		req, err := r.registerRequest(reg)
		if err != nil {
			r.cfg.Logger.Error("namesrv: cannot encode registration", "broker", reg.BrokerName, "err", err)
			continue
		}
		reqs = append(reqs, req)
		seen[regKey{reg.BrokerName, reg.BrokerAddr}] = true
	}
	for _, p := range r.last {
		if k := (regKey{p.BrokerName, p.BrokerAddr}); !seen[k] {
			reqs = append(reqs, unregisterRequest(p))
			delete(r.versions, k)
		}
	}
	r.last = regs
	r.eachServer(func(l *nsLink) { r.send(l, reqs) })
}

// registerRequest encodes a REGISTER_BROKER, advancing the registration's
// data version if what it says changed.
func (r *Registrar) registerRequest(reg Registration) (*remoting.Command, error) {
	table := make(map[string]offsets.TopicConfig, len(reg.Topics))
	for _, tc := range reg.Topics {
		if tc.Attributes == nil {
			tc.Attributes = map[string]string{} // RocketMQ writes {}
		}
		table[tc.TopicName] = tc
	}
	tableJSON, err := json.Marshal(table) // map keys sorted: stable for equal tables
	if err != nil {
		return nil, fmt.Errorf("namesrv: encode topics of %s: %w", reg.BrokerName, err)
	}
	k := regKey{reg.BrokerName, reg.BrokerAddr}
	fp := fmt.Sprintf("%d/%d/%s", reg.BrokerID, reg.StateVersion, tableJSON)
	v := r.versions[k]
	if v == nil || v.fingerprint != fp {
		if v == nil {
			v = &version{}
			r.versions[k] = v
		}
		v.fingerprint = fp
		v.dv = remoting.DataVersion{StateVersion: reg.StateVersion, Timestamp: time.Now().UnixMilli(), Counter: v.dv.Counter + 1}
	}
	var body remoting.RegisterBrokerBody
	w := &body.TopicConfigSerializeWrapper
	if err := json.Unmarshal(tableJSON, &w.TopicConfigTable); err != nil {
		return nil, fmt.Errorf("namesrv: re-read topics of %s: %w", reg.BrokerName, err)
	}
	w.DataVersion = v.dv
	w.TopicQueueMappingInfoMap = map[string]json.RawMessage{}
	body.FilterServerList = []string{}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("namesrv: encode registration of %s: %w", reg.BrokerName, err)
	}
	ha := reg.HAServerAddr
	if ha == "" {
		ha = reg.BrokerAddr
	}
	h := remoting.RegisterBrokerRequestHeader{BrokerName: reg.BrokerName, BrokerAddr: reg.BrokerAddr, ClusterName: reg.Cluster,
		HAServerAddr: ha, BrokerID: reg.BrokerID, BodyCRC32: remoting.BodyCRC32(b), FullTopicTable: true}
	return remoting.NewRequest(remoting.RegisterBroker, h.Encode(), b), nil
}

func unregisterRequest(reg Registration) *remoting.Command {
	h := remoting.UnregisterBrokerRequestHeader{BrokerName: reg.BrokerName, BrokerAddr: reg.BrokerAddr,
		ClusterName: reg.Cluster, BrokerID: reg.BrokerID}
	return remoting.NewRequest(remoting.UnregisterBroker, h.Encode(), nil)
}

// eachServer runs f for every name server in parallel and waits.
func (r *Registrar) eachServer(f func(*nsLink)) {
	var wg sync.WaitGroup
	for _, l := range r.links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(l)
		}()
	}
	wg.Wait()
}

// send sends reqs to one name server in order, stopping at the first
// failure to reach it. The requests are templates: each send uses a copy,
// since Invoke sets the opaque.
func (r *Registrar) send(l *nsLink, reqs []*remoting.Command) {
	for _, tmpl := range reqs {
		req := *tmpl
		resp, err := r.invoke(l, &req)
		if err != nil {
			r.failed(l, "namesrv: name server unreachable", "err", err)
			return
		}
		if resp.Code != remoting.Success {
			// A refusal (a stale leader's claim, say) concerns this one
			// registration; the next may go through.
			r.cfg.Logger.Warn("namesrv: name server refused a request", "namesrv", l.addr, "request", req.Code,
				"broker", req.ExtFields["brokerName"], "id", req.ExtFields["brokerId"], "code", resp.Code, "remark", resp.Remark)
			continue
		}
		if l.failing {
			l.failing = false
			r.cfg.Logger.Info("namesrv: name server reachable again", "namesrv", l.addr)
		}
	}
}

// failed logs a failure the first time in a row it happens (later ones at
// debug level), so a name server that is down costs one line.
func (r *Registrar) failed(l *nsLink, msg string, args ...any) {
	lvl := slog.LevelWarn
	if l.failing {
		lvl = slog.LevelDebug
	}
	l.failing = true
	r.cfg.Logger.Log(context.Background(), lvl, msg, append([]any{"namesrv", l.addr}, args...)...)
}

// invoke sends req on l's connection, dialling one if needed. A
// connection that failed is dropped, to be dialled again next time.
func (r *Registrar) invoke(l *nsLink, req *remoting.Command) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	if l.conn != nil && l.conn.Err() != nil {
		l.conn = nil // broken; its watcher started a round
	}
	if l.conn == nil {
		c, err := remoting.Dial(ctx, l.addr, remoting.Options{Logger: r.cfg.Logger, Dial: r.cfg.Dial})
		if err != nil {
			return nil, err // Dial's error names the address
		}
		l.conn, l.ours = c, new(atomic.Bool)
		r.watch(c, l.ours)
	}
	resp, err := l.conn.Invoke(ctx, req)
	if err != nil {
		l.drop()
		return nil, fmt.Errorf("namesrv: %s: %w", l.addr, err)
	}
	return resp, nil
}

// watch triggers a round when c breaks while the Registrar runs and did
// not close c itself: the name server dropped the registrations made over
// c, and the next round makes them again over a new connection.
func (r *Registrar) watch(c *remoting.Conn, ours *atomic.Bool) {
	r.watchers.Add(1)
	go func() {
		defer r.watchers.Done()
		select {
		case <-c.Done():
			if !ours.Load() {
				r.Trigger()
			}
		case <-r.stop:
		}
	}()
}

// ParseAddrs splits a name-server list "a:9876;b:9876" (commas work too);
// spaces around addresses and empty parts are dropped.
func ParseAddrs(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// AddrsFromEnv returns the name servers of flag, or of the NAMESRV_ADDR
// environment variable when flag is empty: a flag given on the command
// line wins over the environment, as RocketMQ's -n does.
func AddrsFromEnv(flag string) []string {
	if flag != "" {
		return ParseAddrs(flag)
	}
	return ParseAddrs(os.Getenv("NAMESRV_ADDR"))
}
