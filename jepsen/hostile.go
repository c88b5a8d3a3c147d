package jepsen

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/jepsen/history"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// hostileTopic is the topic the flooders of the hostile nemesis send to;
// the workloads never read it.
const hostileTopic = "jepsen-hostile"

// hostileMix is how many connections of each kind one hostile fault
// opens against a node's client port.
var hostileMix = []struct {
	kind string
	n    int
}{
	{"huge prefix", 40},      // a 16 MiB frame announced, nothing sent
	{"oversized prefix", 20}, // a frame above the limit announced
	{"slow writer", 40},      // a valid frame, one byte a second
	{"truncated", 40},        // half a frame, then silence
	{"garbage", 40},          // random bytes
	{"silent", 20},           // connected, never a byte
}

// hostileReadTimeout is the brokers' --client-read-timeout in runs with the
// hostile nemesis: a connection that stops mid-frame is closed after it.
const hostileReadTimeout = 2 * time.Second

// stalls are the kinds that stop mid-frame: only the node's read deadline
// closes them.
var stalls = []string{"huge prefix", "slow writer", "truncated"}

// hostileMinHold is the shortest hostile fault: long enough for the read
// deadline to close stalled connections, with room for a loaded machine.
const hostileMinHold = hostileReadTimeout + 2*time.Second

// hostileFlooders is how many connections send valid requests as fast as
// they go without reading the answers.
const hostileFlooders = 2

// hostile opens hundreds of misbehaving connections to one node's client
// port (the leader half the time) and keeps them open, redialling those the
// node closes, until healed. The node must close each under its read and
// idle deadlines, keep its heap bounded and go on acknowledging the
// workload's sends meanwhile (the availability checker looks at the
// window). The flooders send real messages to hostileTopic and never read
// an answer.
func (e *env) hostile(ev history.Event) (*fault, error) {
	n, what := e.pick(e.rng.IntN(2) == 0)
	addr := e.g.Nodes[n-1].Client
	ctx, cancel := context.WithCancel(context.Background())
	a := &attacker{addr: addr, rng: rand.New(rand.NewPCG(e.rng.Uint64(), e.rng.Uint64())), stalledClosed: map[string]*atomic.Int64{}}
	for _, k := range stalls {
		a.stalledClosed[k] = new(atomic.Int64)
	}
	total := 0
	for _, m := range hostileMix {
		for range m.n {
			a.run(ctx, m.kind)
		}
		total += m.n
	}
	for range hostileFlooders {
		a.run(ctx, "flood")
	}
	pid := e.g.Nodes[n-1].PID()
	before, _ := rssAnon(pid)
	var peak atomic.Int64
	peak.Store(before)
	a.wg.Add(1)
	go func() { // the target's memory, every 200 ms
		defer a.wg.Done()
		for sleepCtx(ctx, 200*time.Millisecond) {
			if v, err := rssAnon(pid); err == nil && v > peak.Load() {
				peak.Store(v)
			}
		}
	}()
	ev.Nodes = []int{n}
	ev.Description = fmt.Sprintf("hostile clients against %s n%d: %d misbehaving connections and %d flooders", what, n, total, hostileFlooders)
	f := &fault{ev: ev}
	started := time.Now()
	f.heal = func() error {
		time.Sleep(time.Until(started.Add(hostileMinHold)))
		cancel()
		a.wg.Wait()
		f.ev.Measures = map[string]int64{"stalled-conns": 0, "stalled-closed-by-node": 0}
		for _, m := range hostileMix {
			if c, ok := a.stalledClosed[m.kind]; ok {
				f.ev.Measures["stalled-conns"] += int64(m.n)
				f.ev.Measures["stalled-closed-by-node"] += c.Load()
			}
		}
		if before > 0 {
			f.ev.Measures["rss-anon-before-bytes"], f.ev.Measures["rss-anon-peak-bytes"] = before, peak.Load()
			if e.powerLoss {
				f.ev.Measures["rss-anon-holds-files"] = 1
			}
		}
		e.log("hostile clients healed", "node", n, "dials", a.dials.Load(), "closedByNode", a.closed.Load(),
			"rssAnonBeforeMiB", before>>20, "rssAnonPeakMiB", peak.Load()>>20)
		return nil
	}
	return f, nil
}

// rssAnon returns a process's resident anonymous memory (RssAnon in
// /proc/PID/status: the heap and stacks, not the mapped log files), in
// bytes.
func rssAnon(pid int) (int64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("jepsen: no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("jepsen: read the status of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("jepsen: RssAnon of %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("jepsen: no RssAnon in the status of %d", pid)
}

// attacker runs the hostile connections of one fault.
type attacker struct {
	addr   string
	wg     sync.WaitGroup
	mu     sync.Mutex
	rng    *rand.Rand
	dials  atomic.Int64
	closed atomic.Int64 // connections the node closed
	// stalledClosed counts, per kind of stalls, the connections the node
	// closed (by its read deadline).
	stalledClosed map[string]*atomic.Int64
}

// payload returns what a connection of kind writes at once (nil: nothing).
func (a *attacker) payload(kind string) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch kind {
	case "huge prefix":
		return binary.BigEndian.AppendUint32(nil, remoting.DefaultMaxFrame)
	case "oversized prefix":
		return binary.BigEndian.AppendUint32(nil, 1<<30)
	case "truncated":
		f := validSend(1000)
		return f[:len(f)/2]
	case "garbage":
		g := make([]byte, 256)
		for i := range g {
			g[i] = byte(a.rng.Uint32())
		}
		return g
	}
	return nil
}

// validSend is a well-formed SEND_MESSAGE frame to hostileTopic.
func validSend(body int) []byte {
	req := remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "jepsen-hostile", "topic": hostileTopic, "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0",
	}, make([]byte, body))
	req.Opaque = 1
	f, err := remoting.AppendFrame(nil, req)
	if err != nil {
		panic(fmt.Sprintf("jepsen: encode a constant frame: %v", err))
	}
	return f
}

// run keeps one connection of kind open until ctx ends: it dials, behaves
// badly, waits for the node to close it, and dials again after a pause.
func (a *attacker) run(ctx context.Context, kind string) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for ctx.Err() == nil {
			d := net.Dialer{Timeout: time.Second}
			nc, err := d.DialContext(ctx, "tcp", a.addr)
			if err != nil {
				sleepCtx(ctx, 500*time.Millisecond) // the node is down or refusing
				continue
			}
			a.dials.Add(1)
			stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
			a.behave(ctx, kind, nc)
			if _, err := io.Copy(io.Discard, nc); err == nil && ctx.Err() == nil {
				a.closed.Add(1) // EOF: the node closed it
				if c, ok := a.stalledClosed[kind]; ok {
					c.Add(1)
				}
			}
			stop()
			_ = nc.Close()
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}()
}

// behave writes what kind writes; slow writers and flooders keep writing
// in the background until the connection fails.
func (a *attacker) behave(ctx context.Context, kind string, nc net.Conn) {
	switch kind {
	case "slow writer":
		f := validSend(100)
		go func() {
			for _, b := range f {
				if _, err := nc.Write([]byte{b}); err != nil || !sleepCtx(ctx, time.Second) {
					return
				}
			}
		}()
	case "flood":
		f := validSend(1024)
		go func() {
			for ctx.Err() == nil {
				if _, err := nc.Write(f); err != nil {
					return
				}
			}
		}()
	default:
		if p := a.payload(kind); p != nil {
			_, _ = nc.Write(p)
		}
	}
}

// sleepCtx sleeps d or until ctx ends; it reports whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
