package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallWait is how long a test waits to conclude that bytes are stalled.
const stallWait = 300 * time.Millisecond

// deliverWait bounds how long a test waits for bytes that must arrive.
const deliverWait = 3 * time.Second

// testLogger sends the package's logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newProxyNet returns a proxy-mode Net of n nodes, closed at cleanup.
func newProxyNet(t *testing.T, n int, opts ...Option) *Net {
	t.Helper()
	nw, err := New(ProxyMode("test"), n, testLogger(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return nw
}

// echoServer echoes every connection and records what it receives.
type echoServer struct {
	addr string
	// got receives every chunk the server reads.
	got chan []byte
	// remotes receives the remote address of every connection.
	remotes chan string
	ln      net.Listener
	wg      sync.WaitGroup
}

// startEcho listens on ip:0 and echoes until cleanup.
func startEcho(t *testing.T, ip string) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{addr: ln.Addr().String(), got: make(chan []byte, 4096), remotes: make(chan string, 1024), ln: ln}
	s.wg.Go(func() {
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.remotes <- c.RemoteAddr().String()
			conns.Go(func() { s.echo(c.(*net.TCPConn)) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// echo copies a connection back to itself, reporting each chunk.
func (s *echoServer) echo(c *net.TCPConn) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		// The deadline ends connections a test leaves open.
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if n > 0 {
			select {
			case s.got <- bytes.Clone(buf[:n]):
			default:
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.CloseWrite()
			}
			return
		}
	}
}

// dialFrom connects to addr from the local address ip.
func dialFrom(ip, addr string, timeout time.Duration) (*net.TCPConn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: timeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// mustDial connects to addr from ip and closes the connection at cleanup.
func mustDial(t *testing.T, ip, addr string) *net.TCPConn {
	t.Helper()
	c, err := dialFrom(ip, addr, deliverWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readFull reads len(want) bytes within timeout and compares them.
func readFull(t *testing.T, c net.Conn, want []byte, timeout time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %d bytes: %v", len(want), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// expectStall checks that nothing can be read from c for stallWait.
func expectStall(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(stallWait))
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want a stall (deadline exceeded)", buf[:n], err)
	}
}

// roundTrip writes msg and reads its echo, returning the time it took.
func roundTrip(t *testing.T, c net.Conn, msg []byte) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	readFull(t, c, msg, deliverWait)
	return time.Since(start)
}

// eventually polls cond until it holds or deliverWait passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(deliverWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// linkStats returns the stats of one link.
func linkStats(t *testing.T, nw *Net, kind string, from, to int) LinkStats {
	t.Helper()
	for _, s := range nw.Stats() {
		if s.Kind == kind && s.From == from && s.To == to {
			return s
		}
	}
	t.Fatalf("no link %s %d->%d", kind, from, to)
	return LinkStats{}
}

// drainGot empties the server's record of received chunks.
func drainGot(s *echoServer) {
	for {
		select {
		case <-s.got:
		default:
			return
		}
	}
}

// receivedWithin collects what the server receives during d.
func receivedWithin(s *echoServer, d time.Duration) []byte {
	var out []byte
	timeout := time.After(d)
	for {
		select {
		case b := <-s.got:
			out = append(out, b...)
		case <-timeout:
			return out
		}
	}
}

func TestProxyForwardsBothWays(t *testing.T) {
	nw := newProxyNet(t, 3)
	srv := startEcho(t, nw.NodeIP(2))
	addr, err := nw.AddLink(LinkRaft, 1, 2, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Fatalf("proxy listens on %s, want 127.0.0.1", addr)
	}
	c := mustDial(t, nw.NodeIP(1), addr)

	payload := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.CloseWrite()
		}
		errc <- err
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c) // ends at the server's half-close, forwarded by the proxy
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes differ from the %d sent", len(got), len(payload))
	}

	remote := <-srv.remotes
	if host, _, _ := net.SplitHostPort(remote); host != nw.NodeIP(1) {
		t.Fatalf("target saw the proxy dial from %s, want node 1's address %s", host, nw.NodeIP(1))
	}
	eventually(t, "byte counters", func() bool {
		s := linkStats(t, nw, LinkRaft, 1, 2)
		return s.BytesFromTo == int64(len(payload)) && s.BytesToFrom == int64(len(payload))
	})
	eventually(t, "connection to finish", func() bool { return linkStats(t, nw, LinkRaft, 1, 2).Active == 0 })
	if s := linkStats(t, nw, LinkRaft, 1, 2); s.Accepted != 1 || s.Resets != 0 || s.DialErrors != 0 {
		t.Fatalf("stats %v", s)
	}
}

func TestPartitionStallsThenHealDelivers(t *testing.T) {
	nw := newProxyNet(t, 3)
	srv := startEcho(t, nw.NodeIP(2))
	addr, err := nw.AddLink(LinkRaft, 1, 2, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	c := mustDial(t, nw.NodeIP(1), addr)
	roundTrip(t, c, []byte("before"))
	drainGot(srv)

	cut, _ := IsolateOne(3, 2)
	if err := nw.Partition(cut); err != nil {
		t.Fatal(err)
	}
	// The established connection stays open but forwards nothing.
	if _, err := c.Write([]byte("during")); err != nil {
		t.Fatal(err)
	}
	expectStall(t, c)
	if got := receivedWithin(srv, 50*time.Millisecond); len(got) != 0 {
		t.Fatalf("server received %q through a cut", got)
	}
	// A new connection is accepted but not forwarded.
	c2 := mustDial(t, nw.NodeIP(1), addr)
	if _, err := c2.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	expectStall(t, c2)
	eventually(t, "a held connection", func() bool { return linkStats(t, nw, LinkRaft, 1, 2).Held == 1 })
	if s := linkStats(t, nw, LinkRaft, 1, 2); s.Active != 2 {
		t.Fatalf("active %d, want 2 (held connections stay open)", s.Active)
	}

	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	if got := nw.Cut(); got != nil {
		t.Fatalf("cut after heal: %v", got)
	}
	// Held bytes are delivered after the heal, on both connections.
	readFull(t, c, []byte("during"), deliverWait)
	readFull(t, c2, []byte("new"), deliverWait)
	roundTrip(t, c, []byte("after"))
	eventually(t, "no held connection", func() bool { return linkStats(t, nw, LinkRaft, 1, 2).Held == 0 })
}

func TestPartitionIsDirected(t *testing.T) {
	nw := newProxyNet(t, 3)
	srv := startEcho(t, nw.NodeIP(2))
	addr, err := nw.AddLink(LinkClient, 1, 2, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	c := mustDial(t, nw.NodeIP(1), addr)
	roundTrip(t, c, []byte("hello"))
	drainGot(srv)

	// 2 -x-> 1: node 1's bytes reach node 2, the replies do not.
	cut, desc := OneWay(3, 2, 1)
	if desc != "one-way n2 -x-> n1" {
		t.Fatalf("description %q", desc)
	}
	if err := nw.Partition(cut); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("ask"))
	if got := receivedWithin(srv, stallWait); string(got) != "ask" {
		t.Fatalf("server received %q, want %q", got, "ask")
	}
	expectStall(t, c)

	// 1 -x-> 2: node 1's bytes do not reach node 2. Partition replaces the
	// previous cut, so the held reply is delivered now.
	if err := nw.Partition([][2]int{{1, 2}}); err != nil {
		t.Fatal(err)
	}
	readFull(t, c, []byte("ask"), deliverWait)
	c.Write([]byte("lost?"))
	if got := receivedWithin(srv, stallWait); len(got) != 0 {
		t.Fatalf("server received %q through a cut", got)
	}
	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	readFull(t, c, []byte("lost?"), deliverWait)

	// A cut unrelated to the link leaves it alone.
	if err := nw.Partition([][2]int{{1, 3}, {3, 1}}); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, []byte("unrelated"))
}

func TestDelayAddsLatency(t *testing.T) {
	nw := newProxyNet(t, 3)
	srv := startEcho(t, nw.NodeIP(2))
	addr, err := nw.AddLink(LinkRaft, 1, 2, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	c := mustDial(t, nw.NodeIP(1), addr)
	if rtt := roundTrip(t, c, []byte("warm")); rtt > 100*time.Millisecond {
		t.Fatalf("round trip without delay took %v", rtt)
	}

	const d = 100 * time.Millisecond
	if err := nw.SetDelay(1, 2, d, 0); err != nil {
		t.Fatal(err)
	}
	if rtt := roundTrip(t, c, []byte("one-way delay")); rtt < d || rtt > d+time.Second {
		t.Fatalf("round trip with %v on 1->2 took %v", d, rtt)
	}
	if err := nw.SetDelay(2, 1, d/2, 0); err != nil {
		t.Fatal(err)
	}
	if rtt := roundTrip(t, c, []byte("both ways")); rtt < d+d/2 || rtt > d+d/2+time.Second {
		t.Fatalf("round trip with %v + %v took %v", d, d/2, rtt)
	}

	// Jitter reorders nothing: many small writes come back in order.
	if err := nw.SetDelay(1, 2, 10*time.Millisecond, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 200 {
		msg := fmt.Sprintf("<%d>", i)
		want.WriteString(msg)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	readFull(t, c, want.Bytes(), 5*time.Second)

	nw.ClearLinkFaults()
	if rtt := roundTrip(t, c, []byte("cleared")); rtt > d {
		t.Fatalf("round trip after ClearLinkFaults took %v", rtt)
	}
}

func TestLossResetsConnections(t *testing.T) {
	nw := newProxyNet(t, 3, WithRand(rand.New(rand.NewPCG(7, 7))))
	srv := startEcho(t, nw.NodeIP(2))
	addr, err := nw.AddLink(LinkRaft, 1, 2, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	c := mustDial(t, nw.NodeIP(1), addr)
	roundTrip(t, c, []byte("ok"))

	if err := nw.SetLoss(1, 2, 1); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("doomed"))
	c.SetReadDeadline(time.Now().Add(deliverWait))
	n, err := c.Read(make([]byte, 16))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want a reset connection", n, err)
	}
	if !strings.Contains(err.Error(), "reset") {
		t.Logf("read error %v (not a reset)", err)
	}
	if s := linkStats(t, nw, LinkRaft, 1, 2); s.Resets != 1 {
		t.Fatalf("resets %d, want 1", s.Resets)
	}

	// With p = 0.3 about 30% of the requests reset their connection; the
	// replies (2->1) are not affected.
	if err := nw.SetLoss(1, 2, 0.3); err != nil {
		t.Fatal(err)
	}
	const requests = 200
	resets := 0
	var conn *net.TCPConn
	for i := range requests {
		if conn == nil {
			conn = mustDial(t, nw.NodeIP(1), addr)
		}
		msg := fmt.Appendf(nil, "req-%d", i)
		conn.Write(msg)
		conn.SetReadDeadline(time.Now().Add(deliverWait))
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(conn, got); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("request %d stalled instead of resetting", i)
			}
			resets++
			conn.Close()
			conn = nil
			continue
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("got %q, want %q", got, msg)
		}
	}
	if resets < 25 || resets > 100 {
		t.Fatalf("%d of %d requests reset with p=0.3", resets, requests)
	}
	if s := linkStats(t, nw, LinkRaft, 1, 2); s.Resets != int64(1+resets) {
		t.Fatalf("resets counter %d, want %d", s.Resets, 1+resets)
	}

	nw.ClearLinkFaults()
	if conn == nil {
		conn = mustDial(t, nw.NodeIP(1), addr)
	}
	for i := range 20 {
		roundTrip(t, conn, fmt.Appendf(nil, "clean-%d", i))
	}
}

func TestDialFailureResetsClient(t *testing.T) {
	nw := newProxyNet(t, 2)
	ln, err := net.Listen("tcp", net.JoinHostPort(nw.NodeIP(2), "0"))
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	addr, err := nw.AddLink(LinkRaft, 1, 2, dead)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy resets the client, often before its connect even returns.
	if c, err := dialFrom(nw.NodeIP(1), addr, deliverWait); err == nil {
		c.SetReadDeadline(time.Now().Add(deliverWait))
		_, err := c.Read(make([]byte, 1))
		c.Close()
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read through a proxy to a closed port: %v", err)
		}
	}
	eventually(t, "the dial error", func() bool { return linkStats(t, nw, LinkRaft, 1, 2).DialErrors == 1 })
	if s := linkStats(t, nw, LinkRaft, 1, 2); s.DialErrors != 1 {
		t.Fatalf("dial errors %d, want 1", s.DialErrors)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	nw, err := New(ProxyMode("test"), 3, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := startEcho(t, nw.NodeIP(3))
	addr, err := nw.AddLink(LinkRaft, 1, 3, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	c := mustDial(t, nw.NodeIP(1), addr)
	roundTrip(t, c, []byte("x"))
	if err := nw.Partition([][2]int{{1, 3}}); err != nil {
		t.Fatal(err)
	}
	held := mustDial(t, nw.NodeIP(1), addr)
	eventually(t, "a held connection", func() bool { return linkStats(t, nw, LinkRaft, 1, 3).Held == 1 })

	done := make(chan error, 1)
	go func() { done <- nw.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(deliverWait):
		t.Fatal("Close hangs")
	}
	for _, conn := range []*net.TCPConn{c, held} {
		conn.SetReadDeadline(time.Now().Add(deliverWait))
		if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection still open after Close: %v", err)
		}
	}
	if _, err := dialFrom(nw.NodeIP(1), addr, time.Second); err == nil {
		t.Fatal("proxy still accepts after Close")
	}
	if _, err := nw.AddLink(LinkRaft, 2, 3, srv.addr); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddLink after Close: %v", err)
	}
	if err := nw.Partition(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Partition after Close: %v", err)
	}
	if err := nw.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestValidation(t *testing.T) {
	nw := newProxyNet(t, 3)
	if got := nw.NodeIP(3); got != "127.0.0.13" {
		t.Fatalf("NodeIP(3) = %s", got)
	}
	bad := []struct {
		name string
		err  error
	}{
		{"kind", func() error { _, err := nw.AddLink("gossip", 1, 2, "127.0.0.1:1"); return err }()},
		{"self link", func() error { _, err := nw.AddLink(LinkRaft, 2, 2, "127.0.0.1:1"); return err }()},
		{"node 0", func() error { _, err := nw.AddLink(LinkRaft, 0, 2, "127.0.0.1:1"); return err }()},
		{"node 4", nw.Partition([][2]int{{1, 4}})},
		{"negative delay", nw.SetDelay(1, 2, -time.Second, 0)},
		{"loss > 1", nw.SetLoss(1, 2, 1.5)},
		{"loss NaN", nw.SetLoss(1, 2, nan())},
	}
	for _, b := range bad {
		if b.err == nil {
			t.Errorf("%s: no error", b.name)
		}
	}
	if _, err := nw.AddLink(LinkRaft, 1, 2, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := nw.AddLink(LinkRaft, 1, 2, "127.0.0.1:1"); err == nil {
		t.Error("duplicate link: no error")
	}
	if _, err := nw.AddLink(LinkClient, 1, 2, "127.0.0.1:1"); err != nil {
		t.Errorf("client link beside a raft link: %v", err)
	}
	if _, err := New(ProxyMode(""), 0, nil); err == nil {
		t.Error("New with 0 nodes: no error")
	}
	if _, err := New(Mode{Kind: "tc"}, 3, nil); err == nil {
		t.Error("New with an unknown kind: no error")
	}
}

// nan returns a NaN without a constant expression.
func nan() float64 {
	zero := 0.0
	return zero / zero
}
