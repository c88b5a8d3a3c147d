package client

import (
	"context"
	"fmt"
	"time"

	"sync"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// pool holds one connection (a remoting.Conn in a poolConn, which signs
// requests when cred is set) per address. A dead connection is replaced
// by a new dial on the next use; concurrent users of an address share one
// dial.
type pool struct {
	opts        remoting.Options
	dialTimeout time.Duration
	// cred, if set, signs every request written on the pool's connections.
	cred *acl.Credentials
	// onRequest, if set, handles the requests a server sends on a
	// connection, told the connection's address (remoting.Options has no
	// room for it, so every dial gets its own OnRequest).
	onRequest func(addr string, req *remoting.Command) *remoting.Command

	mu struct {
		sync.Mutex
		closed bool
		conns  map[string]*poolEntry
	}
}

// poolEntry is an address's connection, or the dial in progress for it.
type poolEntry struct {
	conn *poolConn // nil while dialing
	// dialing is closed when the dial ends; err then holds its error.
	dialing chan struct{}
	err     error
}

func newPool(opts remoting.Options, dialTimeout time.Duration, cred *acl.Credentials, onRequest func(addr string, req *remoting.Command) *remoting.Command) *pool {
	p := &pool{opts: opts, dialTimeout: dialTimeout, cred: cred, onRequest: onRequest}
	p.mu.conns = make(map[string]*poolEntry)
	return p
}

// get returns a live connection to addr, dialling if there is none. The
// dial itself is bounded by dialTimeout and not by ctx, so that the
// connection serves the other waiters even if this caller gives up; ctx
// bounds only the wait.
func (p *pool) get(ctx context.Context, addr string) (*poolConn, error) {
	for {
		p.mu.Lock()
		if p.mu.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		e := p.mu.conns[addr]
		if e != nil && e.conn != nil {
			if e.conn.Err() == nil {
				p.mu.Unlock()
				return e.conn, nil
			}
			delete(p.mu.conns, addr) // dead: dial again
			e = nil
		}
		if e == nil {
			e = &poolEntry{dialing: make(chan struct{})}
			p.mu.conns[addr] = e
			p.mu.Unlock()
			return p.dial(ctx, addr, e)
		}
		p.mu.Unlock()
		select {
		case <-e.dialing:
			if e.err != nil {
				return nil, e.err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("client: waiting for connection to %s: %w", addr, ctx.Err())
		}
	}
}

// dial runs the dial of entry e, registered under addr.
func (p *pool) dial(ctx context.Context, addr string, e *poolEntry) (*poolConn, error) {
	opts := p.opts
	if on := p.onRequest; on != nil {
		opts.OnRequest = func(req *remoting.Command) *remoting.Command { return on(addr, req) }
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.dialTimeout)
	conn, err := remoting.Dial(dctx, addr, opts)
	cancel()

	p.mu.Lock()
	defer p.mu.Unlock()
	defer close(e.dialing)
	if err != nil {
		e.err = fmt.Errorf("client: connect to %s: %w", addr, err)
		delete(p.mu.conns, addr)
		return nil, e.err
	}
	if p.mu.closed {
		_ = conn.Close() // nothing to report: the pool is gone
		e.err = ErrClosed
		delete(p.mu.conns, addr)
		return nil, ErrClosed
	}
	e.conn = &poolConn{rc: conn, cred: p.cred}
	return e.conn, nil
}

// evict closes conn if it is still addr's connection, so that the next
// use dials again. It is called when a request on conn timed out: a
// partitioned peer leaves a TCP connection that looks alive.
func (p *pool) evict(addr string, conn *poolConn) {
	p.mu.Lock()
	e := p.mu.conns[addr]
	if e != nil && e.conn == conn {
		delete(p.mu.conns, addr)
	} else {
		e = nil
	}
	p.mu.Unlock()
	if e != nil {
		// Pending requests fail with ErrConnClosed; that is the point. What
		// is still unsent is dropped, not delivered late.
		_ = conn.Abort()
	}
}

// close closes every connection; later gets fail with ErrClosed.
func (p *pool) close() {
	p.mu.Lock()
	p.mu.closed = true
	var conns []*poolConn
	for _, e := range p.mu.conns {
		if e.conn != nil {
			conns = append(conns, e.conn)
		}
	}
	p.mu.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close() // Close of a remoting.Conn never fails
	}
}
