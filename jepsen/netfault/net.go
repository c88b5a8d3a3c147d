package netfault

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Link kinds accepted by [Net.AddLink].
const (
	// LinkRaft carries raft messages from one node to a peer's raft port.
	LinkRaft = "raft"
	// LinkClient carries client requests a node sends to a peer's client
	// port (for example when forwarding to the leader).
	LinkClient = "client"
)

// TableName is the nft table holding the partition rules in netns mode.
const TableName = "raftmq_jepsen"

// chainName is the chain inside TableName.
const chainName = "partition"

// maxNodes keeps node addresses inside 127.0.0.11..127.0.0.254.
const maxNodes = 244

// dialTimeout bounds a proxy's dial to its target.
const dialTimeout = 5 * time.Second

// ErrClosed is returned by the methods of a Net after Close.
var ErrClosed = errors.New("netfault: network closed")

// firewall installs partition rules at the IP layer.
type firewall interface {
	// setCut replaces the rules with one drop rule per (src, dst) pair.
	setCut(pairs [][2]netip.Addr) error
	// rules returns the number of installed rules.
	rules() (int, error)
	// close removes every rule and the table.
	close() error
}

// Option configures a Net.
type Option func(*options)

// options collects what Options set.
type options struct {
	rng *rand.Rand
}

// WithRand makes the Net draw jitter and loss from rng instead of a
// generator seeded from the clock. The Net serialises its use of rng.
func WithRand(rng *rand.Rand) Option {
	return func(o *options) { o.rng = rng }
}

// Net is the network of one run: the node addresses, the proxies of every
// link and the faults on every directed pair of nodes. It is safe for
// concurrent use.
type Net struct {
	mode  Mode
	nodes int
	// ips[i] is node i's address; ips[0] is unused.
	ips    []netip.Addr
	log    *slog.Logger
	faults *faultTable
	// fw is nil in proxy mode.
	fw firewall
	// ctx is cancelled by Close; it ends dials and wakes held connections.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts listener and connection goroutines.
	wg sync.WaitGroup

	mu struct {
		sync.Mutex
		links  map[linkKey]*link
		cut    [][2]int
		closed bool
	}
}

// linkKey names one proxy.
type linkKey struct {
	kind     string
	from, to int
}

// New creates the network of a run with nodes 1..nodes in the given mode.
// In netns mode it creates the nft table TableName in the current network
// namespace (replacing the rules of a previous run), so the process must be
// inside the namespace [Enter] prepared, or it would change the host's rules. In proxy mode nodes use
// 127.0.0.(10+i) if those addresses can be bound, and all share 127.0.0.1
// otherwise (then they need distinct ports). A nil logger discards logs.
func New(mode Mode, nodes int, logger *slog.Logger, opts ...Option) (*Net, error) {
	if nodes < 1 || nodes > maxNodes {
		return nil, fmt.Errorf("netfault: %d nodes, want 1..%d", nodes, maxNodes)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.rng == nil {
		seed := uint64(time.Now().UnixNano())
		o.rng = rand.New(rand.NewPCG(seed, seed>>1|1))
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Net{
		mode:   mode,
		nodes:  nodes,
		ips:    make([]netip.Addr, nodes+1),
		log:    logger.With("component", "netfault"),
		faults: newFaultTable(nodes, o.rng),
	}
	shared := false
	switch mode.Kind {
	case KindNetNS:
		fw, err := newFirewall()
		if err != nil {
			return nil, err
		}
		n.fw = fw
	case KindProxy:
		shared = !canBind(netip.AddrFrom4([4]byte{127, 0, 0, 11}))
	default:
		return nil, fmt.Errorf("netfault: unknown mode kind %q", string(mode.Kind))
	}
	for i := 1; i <= nodes; i++ {
		n.ips[i] = netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
		if shared {
			n.ips[i] = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.mu.links = make(map[linkKey]*link)
	n.log.Info("network ready", "mode", mode.String(), "nodes", nodes, "shared_ip", shared)
	return n, nil
}

// canBind reports whether a TCP listener can bind ip.
func canBind(ip netip.Addr) bool {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// Mode returns the mode the network was created with.
func (n *Net) Mode() Mode { return n.mode }

// Nodes returns the number of nodes.
func (n *Net) Nodes() int { return n.nodes }

// NodeIP returns node i's address, on which it must listen and from which it
// must dial. It panics if i is not in 1..Nodes().
func (n *Net) NodeIP(i int) string {
	if i < 1 || i > n.nodes {
		panic(fmt.Sprintf("netfault: node %d out of range 1..%d", i, n.nodes))
	}
	return n.ips[i].String()
}

// checkPair validates a directed pair of distinct nodes.
func (n *Net) checkPair(from, to int) error {
	if from < 1 || from > n.nodes || to < 1 || to > n.nodes {
		return fmt.Errorf("netfault: pair (%d,%d) out of range 1..%d", from, to, n.nodes)
	}
	if from == to {
		return fmt.Errorf("netfault: pair (%d,%d) links a node to itself", from, to)
	}
	return nil
}

// AddLink starts the proxy for the link of the given kind (LinkRaft or
// LinkClient) from node "from" to node "to", which forwards to target (the
// real address of node "to") dialing from NodeIP(from). It returns the
// proxy's address, on 127.0.0.1, to give node "from" as its peer's address.
func (n *Net) AddLink(kind string, from, to int, target string) (proxyAddr string, err error) {
	if kind != LinkRaft && kind != LinkClient {
		return "", fmt.Errorf("netfault: link kind %q, want %q or %q", kind, LinkRaft, LinkClient)
	}
	if err := n.checkPair(from, to); err != nil {
		return "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return "", ErrClosed
	}
	key := linkKey{kind: kind, from: from, to: to}
	if _, ok := n.mu.links[key]; ok {
		return "", fmt.Errorf("netfault: link %s %d->%d already exists", kind, from, to)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("netfault: listen for link %s %d->%d: %w", kind, from, to, err)
	}
	l := newLink(n, key, target, ln.(*net.TCPListener))
	n.mu.links[key] = l
	n.wg.Go(l.acceptLoop)
	n.log.Debug("link added", "kind", kind, "from", from, "to", to, "proxy", l.addr, "target", target)
	return l.addr, nil
}

// Partition replaces the current cut with the given directed pairs: every
// byte from "from" to "to" is stalled for each (from, to) in cut. Bytes in
// flight are held, not dropped, and connections stay open (see Heal). New
// connections on a link whose pair is cut either way are accepted but not
// forwarded. In netns mode the same pairs also get nft drop rules.
func (n *Net) Partition(cut [][2]int) error {
	for _, p := range cut {
		if err := n.checkPair(p[0], p[1]); err != nil {
			return err
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return ErrClosed
	}
	set := make(map[[2]int]bool, len(cut))
	for _, p := range cut {
		set[p] = true
	}
	n.faults.update(func(from, to int, f *pairFaults) { f.cut = set[[2]int{from, to}] })
	n.mu.cut = sortedPairs(set)
	n.log.Info("partition", "cut", formatPairs(n.mu.cut))
	if n.fw == nil {
		return nil
	}
	return n.fw.setCut(n.addrPairs(n.mu.cut))
}

// Heal removes every cut: the nft rules first, then the proxy blackholes.
// Held bytes are then delivered, in order, on the connections that carried
// them (like TCP retransmission after a partition heals), and held new
// connections are dialed, unless their client has closed them meanwhile.
// Connections are not reset. In netns mode, traffic that crossed the nft
// rules itself resumes at the pace of TCP retransmission, which backs off
// to seconds after a long cut. Delay and loss stay; see ClearLinkFaults.
func (n *Net) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return ErrClosed
	}
	var err error
	if n.fw != nil {
		err = n.fw.setCut(nil)
	}
	n.faults.update(func(_, _ int, f *pairFaults) { f.cut = false })
	n.mu.cut = nil
	n.log.Info("heal")
	return err
}

// Cut returns the pairs cut by the last Partition, sorted; nil when healed.
func (n *Net) Cut() [][2]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.mu.cut)
}

// SetDelay adds latency to every byte from "from" to "to": each chunk a
// proxy reads is delivered d plus a uniform draw in [-jitter, +jitter]
// (never less than zero) after it was read, and never before the chunk read
// before it, so order is kept. It applies to existing connections too, from
// the next chunk on. d = 0 and jitter = 0 remove the delay.
func (n *Net) SetDelay(from, to int, d, jitter time.Duration) error {
	if err := n.checkPair(from, to); err != nil {
		return err
	}
	if d < 0 || jitter < 0 {
		return fmt.Errorf("netfault: negative delay %v or jitter %v", d, jitter)
	}
	if err := n.checkOpen(); err != nil {
		return err
	}
	n.faults.update(func(f, t int, pf *pairFaults) {
		if f == from && t == to {
			pf.delay, pf.jitter = d, jitter
		}
	})
	n.log.Info("delay", "from", from, "to", to, "delay", d, "jitter", jitter)
	return nil
}

// SetLoss models packet loss from "from" to "to". A proxy cannot drop bytes
// from a TCP stream without corrupting the framing of the protocol inside
// it, so each chunk from "from" to "to" instead resets, with probability p,
// the connection carrying it: both of the proxy's sockets are closed with
// an RST and the chunk is not delivered. p = 0 removes the loss.
func (n *Net) SetLoss(from, to int, p float64) error {
	if err := n.checkPair(from, to); err != nil {
		return err
	}
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("netfault: loss probability %v, want 0..1", p)
	}
	if err := n.checkOpen(); err != nil {
		return err
	}
	n.faults.update(func(f, t int, pf *pairFaults) {
		if f == from && t == to {
			pf.loss = p
		}
	})
	n.log.Info("loss", "from", from, "to", to, "p", p)
	return nil
}

// ClearLinkFaults removes every delay and loss; cuts stay.
func (n *Net) ClearLinkFaults() {
	n.faults.update(func(_, _ int, f *pairFaults) {
		f.delay, f.jitter, f.loss = 0, 0, 0
	})
	n.log.Info("link faults cleared")
}

// checkOpen returns ErrClosed after Close.
func (n *Net) checkOpen() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return ErrClosed
	}
	return nil
}

// Stats returns the counters of every link, sorted by kind, from, to.
func (n *Net) Stats() []LinkStats {
	n.mu.Lock()
	links := make([]*link, 0, len(n.mu.links))
	for _, l := range n.mu.links {
		links = append(links, l)
	}
	n.mu.Unlock()
	out := make([]LinkStats, 0, len(links))
	for _, l := range links {
		out = append(out, l.stats())
	}
	slices.SortFunc(out, func(a, b LinkStats) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		if a.From != b.From {
			return a.From - b.From
		}
		return a.To - b.To
	})
	return out
}

// Close stops every proxy, closes every proxied connection and, in netns
// mode, deletes the nft table. It waits for the proxies' goroutines.
func (n *Net) Close() error {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil
	}
	n.mu.closed = true
	links := make([]*link, 0, len(n.mu.links))
	for _, l := range n.mu.links {
		links = append(links, l)
	}
	n.mu.Unlock()

	n.cancel()
	for _, l := range links {
		l.close()
	}
	n.wg.Wait()
	var err error
	if n.fw != nil {
		err = n.fw.close()
	}
	n.log.Info("network closed")
	return err
}

// firewallRules returns the number of installed nft rules (tests).
func (n *Net) firewallRules() (int, error) {
	if n.fw == nil {
		return 0, nil
	}
	return n.fw.rules()
}

// addrPairs maps node pairs to address pairs.
func (n *Net) addrPairs(pairs [][2]int) [][2]netip.Addr {
	out := make([][2]netip.Addr, len(pairs))
	for i, p := range pairs {
		out[i] = [2]netip.Addr{n.ips[p[0]], n.ips[p[1]]}
	}
	return out
}

// sortedPairs returns the pairs of a set in order.
func sortedPairs(set map[[2]int]bool) [][2]int {
	if len(set) == 0 {
		return nil
	}
	out := make([][2]int, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePairs)
	return out
}

// comparePairs orders pairs by from, then to.
func comparePairs(a, b [2]int) int {
	if a[0] != b[0] {
		return a[0] - b[0]
	}
	return a[1] - b[1]
}

// formatPairs renders pairs as "1->2 2->1".
func formatPairs(pairs [][2]int) string {
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = fmt.Sprintf("%d->%d", p[0], p[1])
	}
	return strings.Join(parts, " ")
}
