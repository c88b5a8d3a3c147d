package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client/admin"
)

// Sessions. A browser signs in once (the login form, or HTTP basic
// authentication) and gets a session cookie; the session holds the
// account's keys, whether the account is an admin, and the token every
// form posts back (CSRF protection: a page of another site can make the
// browser post, not read the token). Without an ACL there is no login, but
// forms still need a session's token. Sessions live in memory: a restart
// signs everyone out.

const (
	sessionCookie = "raftmq_console"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 1024
	csrfField     = "csrf"
)

type session struct {
	id      string
	cr      credentials
	csrf    string
	admin   bool
	expires time.Time
	flash   string // a change's outcome, shown on the next page
}

type sessionKey struct{}

func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// lookup is the unexpired session of r's cookie, if any.
func (c *Console) lookup(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[ck.Value]
	if s == nil || time.Now().After(s.expires) {
		delete(c.sessions, ck.Value)
		return nil
	}
	return s
}

// newSession stores a session for cr and sets its cookie on w.
func (c *Console) newSession(w http.ResponseWriter, r *http.Request, cr credentials, isAdmin bool) *session {
	s := &session{id: randomToken(), cr: cr, csrf: randomToken(), admin: isAdmin, expires: time.Now().Add(sessionTTL)}
	c.mu.Lock()
	if len(c.sessions) >= maxSessions {
		var oldest *session
		for _, o := range c.sessions {
			if oldest == nil || o.expires.Before(oldest.expires) {
				oldest = o
			}
		}
		delete(c.sessions, oldest.id)
	}
	c.sessions[s.id] = s
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.id, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, Expires: s.expires})
	return s
}

func (c *Console) endSession(w http.ResponseWriter, s *session) {
	c.mu.Lock()
	delete(c.sessions, s.id)
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// setFlash keeps a message for the session's next page.
func (c *Console) setFlash(s *session, msg string) {
	c.mu.Lock()
	s.flash = msg
	c.mu.Unlock()
}

func (c *Console) takeFlash(s *session) string {
	if s == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := s.flash
	s.flash = ""
	return m
}

// isAdmin asks the group whether cr is an admin account: the ACL listing
// is admin-only. Without an ACL everyone is.
func (c *Console) isAdmin(ctx context.Context, cr credentials) (bool, error) {
	if cr.accessKey == "" && !c.aclOn() {
		return true, nil
	}
	cl, err := c.client(cr)
	if err != nil {
		return false, err
	}
	_, err = admin.ACL(ctx, cl)
	switch {
	case err == nil:
		return true, nil
	case badCredentials(err):
		return false, err
	case denied(err):
		return false, nil
	}
	return false, err
}

// checkCSRF reports whether a form post carries its session's token.
func checkCSRF(r *http.Request, s *session) bool {
	if s == nil {
		return false
	}
	got := r.PostFormValue(csrfField)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// loginPage shows the sign-in form (GET) or signs in (POST).
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	next := r.FormValue("next")
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") {
		next = Prefix
	}
	v := struct{ Next, AccessKey string }{Next: next}
	if r.Method != http.MethodPost {
		c.render(w, r, http.StatusOK, "login", page{Title: "Sign in", Nav: "login", Data: &v})
		return
	}
	cr := credentials{accessKey: strings.TrimSpace(r.PostFormValue("accessKey")), secretKey: r.PostFormValue("secretKey")}
	v.AccessKey = cr.accessKey
	fail := func(status int, msg string) {
		c.render(w, r, status, "login", page{Title: "Sign in", Nav: "login", Err: msg, Data: &v})
	}
	if cr.accessKey == "" || cr.secretKey == "" {
		fail(http.StatusBadRequest, "Give an account's accessKey and secretKey.")
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	isAdmin, err := c.isAdmin(ctx, cr)
	if err != nil {
		if badCredentials(err) {
			c.log.Warn("console: sign-in refused", "access_key", cr.accessKey, "from", r.RemoteAddr, "err", err)
			fail(http.StatusUnauthorized, "The group refused these keys: "+err.Error())
			return
		}
		fail(http.StatusBadGateway, "The group could not be asked: "+err.Error())
		return
	}
	// A non-admin account is checked with a read it may make.
	if !isAdmin {
		cl, err := c.client(cr)
		if err == nil {
			_, err = admin.ClusterList(ctx, cl)
		}
		if err != nil && badCredentials(err) {
			fail(http.StatusUnauthorized, "The group refused these keys: "+err.Error())
			return
		}
	}
	if old := c.lookup(r); old != nil {
		c.endSession(w, old)
	}
	c.newSession(w, r, cr, isAdmin)
	c.log.Info("console: signed in", "access_key", cr.accessKey, "admin", isAdmin, "from", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if s := sessionOf(r); s != nil {
		c.endSession(w, s)
	}
	target := Prefix
	if c.cfg.ACL {
		target = Prefix + "login"
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// loginURL is the sign-in page that comes back to r's page.
func loginURL(r *http.Request) string {
	return Prefix + "login?next=" + url.QueryEscape(r.URL.RequestURI())
}

var errNotAdmin = errors.New("this change needs an admin account")
