package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/cluster"
)

// The rate is the growth of the topic's offsets over the samples of the
// last minute; fewer than two samples give none.
func TestSamplerRate(t *testing.T) {
	s := newSampler(5 * time.Second)
	t0 := time.Unix(1_000_000, 0)
	st := func(maxOffsets ...int64) cluster.AdminTopicStatus {
		out := cluster.AdminTopicStatus{Topic: "t"}
		for i, m := range maxOffsets {
			out.Queues = append(out.Queues, cluster.AdminQueue{QueueID: int32(i), MaxOffset: m})
		}
		return out
	}
	s.topic(st(0, 0), nil, true, t0)
	r, over := s.rate("t", t0)
	require.Zero(t, over)
	require.Zero(t, r)
	s.topic(st(100, 50), nil, true, t0.Add(50*time.Second))
	s.topic(st(200, 100), nil, true, t0.Add(90*time.Second))
	// The window holds the samples at 50 s and 90 s: 150 messages in 40 s.
	r, over = s.rate("t", t0.Add(90*time.Second))
	require.Equal(t, 40.0, over)
	require.InDelta(t, 3.75, r, 1e-9)
	// A sample within a second of the last is dropped, however often.
	for i := range 5 {
		s.topic(st(210, 100), nil, true, t0.Add(90*time.Second+time.Duration(i+1)*900*time.Millisecond/5))
	}
	require.Len(t, s.topicSeries("t"), 3)
	require.Equal(t, int64(300), s.topicSeries("t")[2].total)
	// Samples older than keepFor are dropped: those at 0 s and 50 s.
	s.topic(st(300, 100), nil, true, t0.Add(keepFor+time.Minute))
	require.Len(t, s.topicSeries("t"), 2)
}

func TestParseTime(t *testing.T) {
	want := time.Date(2026, 11, 27, 15, 4, 5, 0, time.UTC)
	for _, s := range []string{"2026-11-27T15:04:05", "2026-11-27 15:04:05", "2026-11-27T15:04:05Z", "1795791845000"} {
		got, err := parseTime(s)
		require.NoError(t, err, s)
		require.True(t, want.Equal(got), "%s: %s", s, got)
	}
	got, err := parseTime("")
	require.NoError(t, err)
	require.True(t, got.IsZero())
	_, err = parseTime("yesterday")
	require.ErrorIs(t, err, errBadInput)
}

func TestPreview(t *testing.T) {
	require.Equal(t, "hello", preview([]byte("hello"), 10))
	require.Equal(t, "héllo…", preview([]byte("héllo world"), 6), "cut on a rune boundary")
	require.Equal(t, "(3 bytes, binary) 00ff01…", preview([]byte{0, 0xff, 1}, 10))
}

func get(t *testing.T, h http.Handler, path string, auth ...string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	b, err := io.ReadAll(w.Result().Body)
	require.NoError(t, err)
	return w.Result(), string(b)
}

// The pages that need no answer from the group: the redirect, an unknown
// page, the chaos page with and without a runs directory, and the ACL's
// request for keys.
func TestPagesWithoutAGroup(t *testing.T) {
	// The chaos page's handler answers with the path it was given, so
	// the test sees what the console passes on.
	chaos := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "chaos handler at %s", r.URL.Path)
	})
	for _, h := range []http.Handler{nil, chaos} {
		c, err := New(Config{Addrs: []string{"127.0.0.1:1"}, Chaos: h})
		require.NoError(t, err)
		defer c.Close()
		mux := http.NewServeMux()
		c.Register(mux)

		resp, _ := get(t, mux, "/")
		require.Equal(t, http.StatusFound, resp.StatusCode)
		require.Equal(t, "/console/", resp.Header.Get("Location"))
		resp, body := get(t, mux, "/console/nowhere")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Contains(t, body, "no console page at /console/nowhere")
		resp, _ = get(t, mux, "/console/chaos/")
		require.Equal(t, http.StatusMovedPermanently, resp.StatusCode, "the chaos reports moved to the lab")
		require.Equal(t, "/console/lab/chaos/", resp.Header.Get("Location"))
		resp, body = get(t, mux, "/console/lab/")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `href="/console/lab/chaos/"`)
		require.NotContains(t, body, ">Chaos reports</a>\n<span", "not in the main menu")
		resp, body = get(t, mux, "/console/lab/chaos/")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		if h == nil {
			require.Contains(t, body, "--console-runs DIR")
			continue
		}
		require.Equal(t, "chaos handler at /", body)
		resp, body = get(t, mux, "/console/lab/chaos/runs/r1/")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "chaos handler at /runs/r1/", body)
	}

	c, err := New(Config{Addrs: []string{"127.0.0.1:1"}, ACL: true})
	require.NoError(t, err)
	defer c.Close()
	resp, _ := get(t, c, "/console/topics?x=1")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "to the sign-in page")
	require.Equal(t, "/console/login?next=%2Fconsole%2Ftopics%3Fx%3D1", resp.Header.Get("Location"))
	resp, body := get(t, c, "/console/login")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `id="login"`)
	resp, _ = get(t, c, "/console/nowhere", "ak", "sk")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "signed in")
}

// A group with popped messages in flight shows them on its page, with a
// column per queue; one without shows no such column.
func TestGroupPageInFlight(t *testing.T) {
	tm, err := templates()
	require.NoError(t, err)
	render := func(p cluster.AdminConsumerProgress) string {
		var v struct {
			Progress cluster.AdminConsumerProgress
			Conn     cluster.AdminConsumerConnection
			ConnErr  string
			DLQ      int64
			Plot     template.HTML
			Interval time.Duration
		}
		v.Progress = p
		var buf bytes.Buffer
		require.NoError(t, tm["group"].ExecuteTemplate(&buf, "layout", page{Title: "g", Data: v}))
		return buf.String()
	}
	p := cluster.AdminConsumerProgress{Group: "g", Queues: []cluster.AdminConsumeQueue{{Topic: "T", QueueID: 0, InFlight: 3}, {Topic: "T", QueueID: 1}}, TotalInFlight: 3}
	out := render(p)
	require.Contains(t, out, `<b id="total-in-flight">3</b>`)
	require.Contains(t, out, `<td class="n" data-k="inflight">3</td>`)
	require.Contains(t, out, `<td class="n" data-k="inflight">0</td>`)
	p.TotalInFlight, p.Queues[0].InFlight = 0, 0
	require.NotContains(t, render(p), "inflight")
}

// A form post needs its session's CSRF token; without it nothing is
// asked of the group.
func TestFormsNeedTheSessionToken(t *testing.T) {
	c, err := New(Config{Addrs: []string{"127.0.0.1:1"}, RequestTimeout: time.Second})
	require.NoError(t, err)
	defer c.Close()
	resp, _ := get(t, c, "/console/lab/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie {
			cookie = ck
		}
	}
	require.NotNil(t, cookie, "a session cookie")
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	post := func(form url.Values, withCookie bool) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/console/topics", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if withCookie {
			req.AddCookie(cookie)
		}
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	code, body := post(url.Values{"topic": {"t"}}, true)
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, "token is missing or stale")
	code, _ = post(url.Values{"topic": {"t"}, csrfField: {"0123"}}, true)
	require.Equal(t, http.StatusForbidden, code, "a wrong token")
	c.mu.Lock()
	token := c.sessions[cookie.Value].csrf
	c.mu.Unlock()
	code, _ = post(url.Values{"topic": {"t"}, csrfField: {token}}, false)
	require.Equal(t, http.StatusForbidden, code, "the token without its session")
	// With both, the change is asked of the group: unreachable here, and
	// the page says it failed.
	code, body = post(url.Values{"topic": {"t"}, csrfField: {token}}, true)
	require.Equal(t, http.StatusBadGateway, code, body)
	require.Contains(t, body, "Topic t failed")
	code, body = post(url.Values{"topic": {"t"}, "perm": {"5"}, csrfField: {token}}, true)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "perm 5: want 2")
}
