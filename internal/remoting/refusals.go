package remoting

import (
	"net"
	"sync"
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
