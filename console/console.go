// Package console is the web console each broker serves on its HTTP port
// (`raftmq broker --http ADDR`, at /console/): the group's members, topics,
// consumer groups with their lag, message search and dead-letter queues,
// as server-rendered HTML (html/template, CSS and SVG plots inline, no
// script, nothing fetched from elsewhere: the pages work offline), plus a
// chaos page served by a handler the caller passes in (Config.Chaos: the
// binary's chaos reports), of which the console knows nothing.
//
// The console holds no state of the group: every figure on a page is the
// answer of the group's admin API to a request made for that page, through
// a client.Client dialled to the node's own client address (and the other
// members'), the same requests the CLI makes (package admin). What it keeps
// is display-only and in memory: samples of the topics' offsets and the
// groups' lag, taken every few seconds for topics and groups viewed in the
// last ten minutes, from which it draws message rates and lag over time.
//
// With an ACL, a user signs in with an account's accessKey and secretKey
// (the login form, or HTTP basic authentication), and the console signs
// its requests to the group with them: what a user sees is what their
// account may read, and what they change goes through the group's ACL
// and audit log as the CLI's changes do (session.go, actions.go).
package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Prefix is where a console is mounted on the broker's HTTP mux.
const Prefix = "/console/"

// Config configures a console.
type Config struct {
	// Addrs are client addresses of the group's nodes, the console's own
	// node first.
	Addrs []string
	// TLS, if set, is the client side of TLS for connections to the
	// nodes (the node's own settings when its client port serves TLS).
	TLS *tls.Config
	// ACL: the group enforces an ACL. Every page then requires HTTP basic
	// authentication with an account's accessKey (user) and secretKey
	// (password), which sign the console's requests to the group.
	ACL bool
	// Chaos, if set, serves the chaos page: the requests under
	// /console/lab/chaos/, with that prefix stripped (so the page's index is
	// "/"). Without it the page says how to give the broker a directory of
	// chaos runs. The console knows nothing of what it serves.
	Chaos http.Handler
	// ACLEnforced, if set, tells whether the node enforces an ACL now
	// (one taken from the group's log counts as much as ACL).
	ACLEnforced func() bool
	// SampleInterval: how often viewed topics and groups are sampled for
	// rates and lag plots (default 5 s).
	SampleInterval time.Duration
	// Refresh: pages showing live figures reload themselves this often
	// (<meta http-equiv="refresh">; default 10 s, negative: never).
	Refresh time.Duration
	// RequestTimeout bounds the requests made for one page (default 10 s).
	RequestTimeout time.Duration
	Logger         *slog.Logger
}

// maxClients bounds the clients kept for distinct credentials (ACL).
const maxClients = 16

// Console is an http.Handler serving the console under Prefix.
type Console struct {
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	chaos  http.Handler
	sample *sampler
	tmpl   map[string]*template.Template

	mu       sync.Mutex
	clients  map[credentials]*clientEntry
	sessions map[string]*session
	closed   bool

	stop chan struct{}
	wg   sync.WaitGroup
}

type credentials struct{ accessKey, secretKey string }

type clientEntry struct {
	cl       *client.Client
	lastUsed time.Time
}

// New returns a console of the group at cfg.Addrs and starts its sampler;
// Close stops it.
func New(cfg Config) (*Console, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("console: no node address")
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 5 * time.Second
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 10 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, log: cfg.Logger.With("component", "console"), clients: map[credentials]*clientEntry{},
		sessions: map[string]*session{}, stop: make(chan struct{})}
	c.sample = newSampler(cfg.SampleInterval)
	var err error
	if c.tmpl, err = templates(); err != nil {
		return nil, err
	}
	if cfg.Chaos != nil {
		c.chaos = http.StripPrefix(Prefix+"lab/chaos", cfg.Chaos)
	}
	c.mux = c.routes()
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.sampleLoop() }()
	return c, nil
}

// Register mounts the console on mux at Prefix, and "/" redirecting there.
func (c *Console) Register(mux *http.ServeMux) {
	mux.Handle(Prefix, c)
	mux.Handle("/{$}", http.RedirectHandler(Prefix, http.StatusFound))
}

// Close stops the sampler and closes the console's clients.
func (c *Console) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.stop)
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for k, e := range c.clients {
		errs = append(errs, e.cl.Close())
		delete(c.clients, k)
	}
	return errors.Join(errs...)
}

// aclOn reports whether users must sign in.
func (c *Console) aclOn() bool {
	return c.cfg.ACL || (c.cfg.ACLEnforced != nil && c.cfg.ACLEnforced())
}

// ServeHTTP finds the request's session (its cookie, or HTTP basic
// authentication, which starts one), checks a form's CSRF token, and
// serves the page with a client signing as the session's account.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == Prefix+"login" && (r.Method == http.MethodGet || r.Method == http.MethodPost) {
		c.loginPage(w, r)
		return
	}
	s := c.lookup(r)
	if user, pass, ok := r.BasicAuth(); ok && user != "" {
		if cr := (credentials{accessKey: user, secretKey: pass}); s == nil || s.cr != cr {
			ctx, cancel := c.ctx(r)
			isAdmin, err := c.isAdmin(ctx, cr)
			cancel()
			if err != nil && badCredentials(err) {
				askAuth(w, "the group refused these keys: "+err.Error())
				return
			}
			s = c.newSession(w, r, cr, isAdmin)
		}
	}
	if s == nil {
		if c.aclOn() {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, loginURL(r), http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusForbidden)
			return
		}
		s = c.newSession(w, r, credentials{}, true)
	}
	if r.Method == http.MethodPost && !checkCSRF(r, s) {
		c.log.Warn("console: form refused: missing or stale CSRF token", "path", r.URL.Path, "access_key", s.cr.accessKey, "from", r.RemoteAddr)
		c.render(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)), http.StatusForbidden, "none",
			page{Title: "Form refused", Err: "The form's token is missing or stale (the console restarted, or the form came from another site): reload the page and try again."})
		return
	}
	cl, err := c.client(s.cr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	ctx := context.WithValue(context.WithValue(r.Context(), clientKey{}, cl), sessionKey{}, s)
	c.mux.ServeHTTP(w, r.WithContext(ctx))
}

func askAuth(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="raftmq console", charset="UTF-8"`)
	http.Error(w, msg, http.StatusUnauthorized)
}

type clientKey struct{}

// clientOf is the client a request's page is made with.
func clientOf(r *http.Request) *client.Client {
	cl, _ := r.Context().Value(clientKey{}).(*client.Client)
	return cl
}

// client returns the client signing with cr (none without an ACL),
// dialled lazily to the group's addresses.
func (c *Console) client(cr credentials) (*client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("console: closed")
	}
	if e, ok := c.clients[cr]; ok {
		e.lastUsed = time.Now()
		return e.cl, nil
	}
	if len(c.clients) >= maxClients {
		var oldest credentials
		var at time.Time
		for k, e := range c.clients {
			if at.IsZero() || e.lastUsed.Before(at) {
				oldest, at = k, e.lastUsed
			}
		}
		c.sample.forget(c.clients[oldest].cl)
		c.clients[oldest].cl.Close()
		delete(c.clients, oldest)
	}
	cl, err := client.New(client.Options{Addrs: c.cfg.Addrs, TLS: c.cfg.TLS, Logger: c.log,
		AccessKey: cr.accessKey, SecretKey: cr.secretKey})
	if err != nil {
		return nil, fmt.Errorf("console: client: %w", err)
	}
	c.clients[cr] = &clientEntry{cl: cl, lastUsed: time.Now()}
	return cl, nil
}

// denied reports whether err is the group's ACL refusing a request.
func denied(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Code == remoting.NoPermission
}

// badCredentials reports whether err is the ACL refusing the account
// itself (unknown access key, wrong secret key), not one of its requests:
// the browser asks for the keys again.
func badCredentials(err error) bool {
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != remoting.NoPermission {
		return false
	}
	return strings.Contains(ce.Remark, "No accessKey") || strings.Contains(ce.Remark, "No acl config for") ||
		strings.Contains(ce.Remark, "Check signature failed")
}
