package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/internal/remoting"
	"github.com/raftmq/raftmq/offsets"
)

// DefaultRegisterInterval is how often a broker registers, as RocketMQ's.
const DefaultRegisterInterval = 30 * time.Second

// Registration is what a broker tells the name servers about one broker
// name it serves.
type Registration struct {
	Cluster, BrokerName, BrokerAddr string
	BrokerID                        int64
	// StateVersion: raftmq sends its raft term.
	StateVersion int64
	Topics       []offsets.TopicConfig
}

// RegistrarConfig configures a Registrar.
type RegistrarConfig struct {
	// Addrs are the name servers.
	Addrs []string
	// State returns what to register now (several broker names for a
	// raftmq node: its group's, and its failover name).
	State    func() []Registration
	Interval time.Duration // DefaultRegisterInterval if 0
	Logger   *slog.Logger
}

// Registrar keeps a broker registered with its name servers: at start,
// every Interval, and at once after Trigger. One goroutine does the
// sending.
type Registrar struct {
	cfg     RegistrarConfig
	trigger chan struct{}
	stop    chan struct{}
	done    chan struct{}

	mu    sync.Mutex
	conns map[string]*remoting.Conn
	last  []Registration // what was registered last, to unregister at Close
}

// ParseAddrs splits a name-server list "a:9876;b:9876" (commas too);
// empty parts are skipped.
func ParseAddrs(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// AddrsFromEnv returns flag's name servers, or NAMESRV_ADDR's when flag is
// empty (the flag wins, as with RocketMQ's -n over its environment).
func AddrsFromEnv(flag string) []string {
	if flag != "" {
		return ParseAddrs(flag)
	}
	return ParseAddrs(os.Getenv("NAMESRV_ADDR"))
}

// NewRegistrar starts a registrar.
func NewRegistrar(cfg RegistrarConfig) *Registrar {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultRegisterInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Registrar{cfg: cfg, trigger: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), conns: map[string]*remoting.Conn{}}
	go r.run()
	return r
}

// Trigger asks for a registration now; calls while one is pending merge.
func (r *Registrar) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Close unregisters what was registered last and stops.
func (r *Registrar) Close() {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	for _, reg := range last {
		h := remoting.UnregisterBrokerRequestHeader{BrokerName: reg.BrokerName, BrokerAddr: reg.BrokerAddr, ClusterName: reg.Cluster, BrokerID: reg.BrokerID}
		r.each(func(ctx context.Context, c *remoting.Conn) error {
			_, err := c.Invoke(ctx, remoting.NewRequest(remoting.UnregisterBroker, h.Encode(), nil))
			return err
		})
	}
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
}

func (r *Registrar) run() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		r.registerAll()
		select {
		case <-t.C:
		case <-r.trigger:
		case <-r.stop:
			return
		}
	}
}

func (r *Registrar) registerAll() {
	regs := r.cfg.State()
	r.mu.Lock()
	prev := r.last
	r.last = regs
	r.mu.Unlock()
	for _, reg := range regs {
		h, body, err := encodeRegistration(reg)
		if err != nil {
			r.cfg.Logger.Error("namesrv: encode registration", "err", err)
			continue
		}
		ext := h.Encode()
		r.each(func(ctx context.Context, c *remoting.Conn) error {
			resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.RegisterBroker, ext, body))
			if err == nil && resp.Code != remoting.Success {
				err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
			}
			return err
		})
	}
	// A broker name registered before and not now (a failover name given
	// up) is unregistered.
	for _, p := range prev {
		gone := true
		for _, reg := range regs {
			if reg.BrokerName == p.BrokerName && reg.BrokerAddr == p.BrokerAddr {
				gone = false
			}
		}
		if gone {
			h := remoting.UnregisterBrokerRequestHeader{BrokerName: p.BrokerName, BrokerAddr: p.BrokerAddr, ClusterName: p.Cluster, BrokerID: p.BrokerID}
			r.each(func(ctx context.Context, c *remoting.Conn) error {
				_, err := c.Invoke(ctx, remoting.NewRequest(remoting.UnregisterBroker, h.Encode(), nil))
				return err
			})
		}
	}
}

func encodeRegistration(reg Registration) (remoting.RegisterBrokerRequestHeader, []byte, error) {
	var body remoting.RegisterBrokerBody
	body.TopicConfigSerializeWrapper.TopicConfigTable = map[string]json.RawMessage{}
	for _, tc := range reg.Topics {
		b, err := json.Marshal(tc)
		if err != nil {
			return remoting.RegisterBrokerRequestHeader{}, nil, err
		}
		body.TopicConfigSerializeWrapper.TopicConfigTable[tc.TopicName] = b
	}
	body.TopicConfigSerializeWrapper.DataVersion = remoting.DataVersion{StateVersion: reg.StateVersion, Timestamp: time.Now().UnixMilli()}
	body.FilterServerList = []string{}
	b, err := json.Marshal(body)
	if err != nil {
		return remoting.RegisterBrokerRequestHeader{}, nil, err
	}
	h := remoting.RegisterBrokerRequestHeader{BrokerName: reg.BrokerName, BrokerAddr: reg.BrokerAddr, ClusterName: reg.Cluster,
		HAServerAddr: reg.BrokerAddr, BrokerID: reg.BrokerID, BodyCRC32: remoting.BodyCRC32(b)}
	return h, b, nil
}

// each runs f against every name server, each with a 3 s deadline,
// logging failures (a name server down must not stop the others).
func (r *Registrar) each(f func(context.Context, *remoting.Conn) error) {
	for _, addr := range r.cfg.Addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := r.conn(ctx, addr)
		if err == nil {
			err = f(ctx, c)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				select {
				case <-c.Done():
					r.forget(addr, c)
				default:
				}
			}
		}
		cancel()
		if err != nil {
			r.cfg.Logger.Warn("namesrv: name server request failed", "namesrv", addr, "err", err)
		}
	}
}

func (r *Registrar) conn(ctx context.Context, addr string) (*remoting.Conn, error) {
	r.mu.Lock()
	c := r.conns[addr]
	r.mu.Unlock()
	if c != nil {
		select {
		case <-c.Done():
			r.forget(addr, c)
		default:
			return c, nil
		}
	}
	c, err := remoting.Dial(ctx, addr, remoting.Options{})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.conns[addr] = c
	r.mu.Unlock()
	return c, nil
}

func (r *Registrar) forget(addr string, c *remoting.Conn) {
	r.mu.Lock()
	if r.conns[addr] == c {
		delete(r.conns, addr)
	}
	r.mu.Unlock()
	c.Close()
}
