package cluster

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/acl"
)

// httpGet asks for path on addr with the given Authorization setter and
// returns the status code, body and WWW-Authenticate values.
func httpGet(t *testing.T, addr, path string, auth func(*http.Request)) (int, string, []string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	if auth != nil {
		auth(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header.Values("WWW-Authenticate")
}

func basic(user, pass string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, pass) }
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// consolePage stands for the web console on the HTTP port.
func consolePage(mux *http.ServeMux) {
	mux.HandleFunc("/console/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "console") })
}

// With an ACL, the monitoring paths need credentials: an ACL account's
// keys (basic authentication) or the bearer token; without them, a wrong
// secret or a wrong token, 401 with the reason. The console signs users
// in itself (package console): its paths reach it.
func TestHTTPPortFollowsTheACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(testACL), 0o600))
	const token = "scrape-token-0123456789"
	addrs := freeAddrs(t, 3)
	key := acl.NewKey()
	tb := startBrokersWith(t, func(c *Config) {
		c.ACLFile, c.ACLKey, c.HTTPAddr, c.HTTPToken, c.HTTPHandlers = file, key, addrs[c.ID-1], token, consolePage
	})
	for _, b := range tb.bs {
		addr := b.cfg.HTTPAddr
		for _, path := range []string{"/status", "/metrics"} {
			code, body, challenge := httpGet(t, addr, path, nil)
			require.Equal(t, http.StatusUnauthorized, code, "%s without credentials: %s", path, body)
			require.Contains(t, challenge, `Basic realm="raftmq", charset="UTF-8"`)
			require.Contains(t, challenge, `Bearer realm="raftmq"`)

			code, body, _ = httpGet(t, addr, path, basic("producer1", "producer-secret"))
			require.Equal(t, http.StatusOK, code, "%s with a non-admin account's keys: %s", path, body)
			code, body, _ = httpGet(t, addr, path, basic("producer1", "operator-secret"))
			require.Equal(t, http.StatusUnauthorized, code, "%s with a wrong secret key", path)
			require.Contains(t, body, "Check signature failed for accessKey=producer1")
			code, body, _ = httpGet(t, addr, path, basic("nobody00", "producer-secret"))
			require.Equal(t, http.StatusUnauthorized, code, "%s with an unknown account", path)
			require.Contains(t, body, "No acl config for nobody00")
			code, _, _ = httpGet(t, addr, path, bearer("not-the-token"))
			require.Equal(t, http.StatusUnauthorized, code, "%s with a wrong token", path)
		}
		for _, path := range []string{"/status", "/metrics"} {
			code, body, _ := httpGet(t, addr, path, bearer(token))
			require.Equal(t, http.StatusOK, code, "%s with the token: %s", path, body)
		}
		code, body, _ := httpGet(t, addr, "/console/", nil)
		require.Equal(t, http.StatusOK, code, "the console's own sign-in decides: %s", body)
		require.Equal(t, "console", body)
		code, _, _ = httpGet(t, addr, "/debug/pprof/", basic("producer1", "operator-secret"))
		require.Equal(t, http.StatusUnauthorized, code, "other paths still need the keys")
	}
}

// A token without an ACL guards the monitoring paths; the console (which
// has nothing to sign with) stays open. Without either, /status answers
// anyone, as before.
func TestHTTPTokenWithoutACL(t *testing.T) {
	const token = "scrape-token-0123456789"
	addrs := freeAddrs(t, 3)
	tb := startBrokersWith(t, func(c *Config) {
		c.HTTPAddr, c.HTTPHandlers = addrs[c.ID-1], consolePage
		if c.ID != 3 {
			c.HTTPToken = token
		}
	})
	for id := uint64(1); id <= 2; id++ {
		addr := tb.bs[id].cfg.HTTPAddr
		for _, path := range []string{"/status", "/metrics"} {
			code, _, challenge := httpGet(t, addr, path, nil)
			require.Equal(t, http.StatusUnauthorized, code, "%s without the token", path)
			require.Contains(t, challenge, `Bearer realm="raftmq"`)
			code, _, _ = httpGet(t, addr, path, basic("producer1", "producer-secret"))
			require.Equal(t, http.StatusUnauthorized, code, "%s: no ACL, so no account opens it", path)
			code, _, _ = httpGet(t, addr, path, bearer(token))
			require.Equal(t, http.StatusOK, code, "%s with the token", path)
		}
		code, _, _ := httpGet(t, addr, "/console/", nil)
		require.Equal(t, http.StatusOK, code, "the console without an ACL")
	}
	code, _, _ := httpGet(t, tb.bs[3].cfg.HTTPAddr, "/status", nil)
	require.Equal(t, http.StatusOK, code, "neither an ACL nor a token")
}
