package remoting

import (
	"net"
	"sync"
	"time"
)

// Refusals remembers which client hosts have had which request codes
// refused, so that a server logs each refusal once per host and code: an
// operator sees why a client fails without a line per retry. The zero
// value is ready to use and safe for concurrent use.
type Refusals struct {
	mu   sync.Mutex
	seen map[refusal]struct{}
}

type refusal struct {
	host         string
	code, answer int32
}

// maxRefusals bounds the memory of Refusals: past it, every refusal is
// reported as new (a client flooding bad requests is worth seeing).
const maxRefusals = 4096

// First reports whether req, from conn (nil: unknown), is the first
// request of its code from its host to be answered with code answer, and
// returns the client's address for the log line.
func (r *Refusals) First(conn *ServerConn, req *Command, answer int32) (addr string, first bool) {
	host := ""
	if conn != nil {
		addr = conn.RemoteAddr().String()
		host = addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			host = h
		}
	}
	k := refusal{host: host, code: req.Code, answer: answer}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[k]; ok {
		return addr, false
	}
	if r.seen == nil {
		r.seen = map[refusal]struct{}{}
	}
	if len(r.seen) < maxRefusals {
		r.seen[k] = struct{}{}
	}
	return addr, true
}

// offenderLog rate-limits the log lines of a server about connections it
// closes for misbehaving (an oversized or malformed frame, a frame too slow
// to arrive, idleness, one connection too many): one line per connection,
// and per client host and reason at most offenderLines a minute. The
// first line after a suppression says how many were left out. The zero
// value is ready to use and safe for concurrent use.
type offenderLog struct {
	mu sync.Mutex
	m  map[offenderKey]*offenderWindow
}

type offenderKey struct{ host, reason string }

type offenderWindow struct {
	start      time.Time
	lines      int
	suppressed int
}

// Offender log limits.
const (
	// offenderLines is how many lines one host and reason get per
	// offenderWindowLen.
	offenderLines     = 256
	offenderWindowLen = time.Minute
	// maxOffenders bounds the hosts and reasons remembered; past it,
	// every line is logged.
	maxOffenders = 4096
)

// allow reports whether to log the closing of a connection from addr for
// reason, and how many lines for that host and reason were suppressed
// since the last one logged.
func (o *offenderLog) allow(addr, reason string) (ok bool, suppressed int) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	k := offenderKey{host, reason}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.m[k]
	if w == nil {
		if o.m == nil {
			o.m = map[offenderKey]*offenderWindow{}
		}
		if len(o.m) >= maxOffenders {
			for k, w := range o.m {
				if now.Sub(w.start) >= offenderWindowLen {
					delete(o.m, k)
				}
			}
			if len(o.m) >= maxOffenders {
				return true, 0
			}
		}
		w = &offenderWindow{start: now}
		o.m[k] = w
	}
	if now.Sub(w.start) >= offenderWindowLen {
		w.start, w.lines = now, 0
	}
	if w.lines >= offenderLines {
		w.suppressed++
		return false, 0
	}
	w.lines++
	suppressed, w.suppressed = w.suppressed, 0
	return true, suppressed
}
