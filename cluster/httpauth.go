package cluster

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Access to the HTTP port. The port serves the node's status (/status),
// its metrics (/metrics), profiles (/debug/pprof/, loopback clients
// only) and the web console. With an ACL in force (Broker.policy), every
// request on it needs one of:
//
//   - HTTP basic authentication with an ACL account's accessKey (user)
//     and secretKey (password), decided as the ACL decides a CLUSTER_STATUS
//     request signed with those keys from the same address: an unknown
//     account or a wrong secret is refused; a client address in
//     globalWhiteRemoteAddresses needs no credentials at all, and one in
//     the account's whiteRemoteAddress no secret, as on the client port.
//     CLUSTER_STATUS is the read-only request that answers what /status
//     does, so every account may read the status and the metrics; the
//     console then signs its requests with the same keys, so a page shows
//     what the account may read;
//   - for the web console (/console/, and / which redirects there) none
//     here: the console signs in users itself (a login form mapped to an
//     ACL account, a session cookie, HTTP basic authentication too) and
//     signs each of its requests to the group with the user's keys, so the
//     ACL decides every figure and change it shows;
//   - for the monitoring paths (/status, /metrics, /debug/pprof/, /debug/sendtrace, /debug/poptrace) only,
//     the bearer token of Config.HTTPToken (`Authorization: Bearer T`, as
//     Prometheus sends it), so that a scraper needs no ACL account.
//
// With a token and no ACL, the monitoring paths need the token and the
// console is open (it has nothing to sign with). With neither, the port
// answers anyone, as the client port does. A refused request gets 401
// with WWW-Authenticate and the reason, and is logged at Warn once per
// client host and reason, later ones at Debug.

// monitoringPath reports whether path is one a bearer token opens.
func monitoringPath(path string) bool {
	return path == "/status" || path == "/metrics" || strings.HasPrefix(path, "/debug/pprof/") || path == "/debug/sendtrace" || path == "/debug/poptrace"
}

// httpAuth wraps the HTTP port's handler with the checks above.
func (b *Broker) httpAuth(next http.Handler) http.Handler {
	refused := &httpRefusals{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reason := b.httpDenied(r)
		if reason == "" {
			next.ServeHTTP(w, r)
			return
		}
		refused.log(b.log, r, reason)
		w.Header().Add("WWW-Authenticate", `Basic realm="raftmq", charset="UTF-8"`)
		if b.cfg.HTTPToken != "" {
			w.Header().Add("WWW-Authenticate", `Bearer realm="raftmq"`)
		}
		http.Error(w, "raftmq: "+reason, http.StatusUnauthorized)
	})
}

// httpDenied returns why r may not be served, or "" if it may.
func (b *Broker) httpDenied(r *http.Request) string {
	p := b.policy()
	token := b.cfg.HTTPToken
	monitoring := monitoringPath(r.URL.Path)
	if p == nil && (token == "" || !monitoring) {
		return ""
	}
	if r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/console/") {
		return ""
	}
	auth := r.Header.Get("Authorization")
	if scheme, cred, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
		switch {
		case token == "":
			return "this node takes no bearer token: sign in with an ACL account's accessKey and secretKey (basic authentication)"
		case subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), []byte(token)) != 1:
			return "wrong bearer token"
		case !monitoring:
			return "the bearer token opens /status, /metrics and /debug/pprof/ only: sign in with an ACL account's accessKey and secretKey"
		}
		return ""
	}
	if p == nil {
		return "a bearer token is required (Authorization: Bearer ...)"
	}
	req := acl.Request{RemoteAddr: r.RemoteAddr, Code: remoting.ClusterStatus}
	if user, pass, ok := r.BasicAuth(); ok && user != "" {
		req.ExtFields = acl.Credentials{AccessKey: user, SecretKey: pass}.SignFields(nil, nil)
	}
	if _, err := p.Check(req); err != nil {
		var de *acl.DeniedError
		if errors.As(err, &de) {
			if de.AccessKey == "" {
				return "this node has an ACL: sign in with an account's accessKey (user) and secretKey (password)"
			}
			return de.Msg
		}
		return err.Error()
	}
	return ""
}

// httpRefusals logs refused HTTP requests, the first per client host and
// reason at Warn, the rest at Debug. The zero value is ready to use and
// safe for concurrent use.
type httpRefusals struct {
	mu   sync.Mutex
	seen map[[2]string]struct{}
}

// maxHTTPRefusals bounds httpRefusals' memory: past it, every refusal is
// logged at Warn.
const maxHTTPRefusals = 4096

func (h *httpRefusals) log(log *slog.Logger, r *http.Request, reason string) {
	host := r.RemoteAddr
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	k := [2]string{host, reason}
	h.mu.Lock()
	_, seen := h.seen[k]
	if !seen && len(h.seen) < maxHTTPRefusals {
		if h.seen == nil {
			h.seen = map[[2]string]struct{}{}
		}
		h.seen[k] = struct{}{}
	}
	h.mu.Unlock()
	if seen {
		log.Debug("cluster: HTTP request refused", "client", r.RemoteAddr, "path", r.URL.Path, "reason", reason)
		return
	}
	log.Warn("cluster: HTTP request refused (logged once per client host and reason)", "client", r.RemoteAddr, "path", r.URL.Path, "reason", reason)
}
