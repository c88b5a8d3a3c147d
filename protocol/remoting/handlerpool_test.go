package remoting

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goroutineID reads the calling goroutine's id from its stack header.
func goroutineID() string {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	return strings.Fields(string(b[:n]))[1]
}

func (p *handlerPool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// A goroutine that ran a handler parks and runs the next request; Close
// ends it.
func TestHandlerGoroutinesPark(t *testing.T) {
	ran := make(chan string, 2)
	ts := startServer(t, func(_ context.Context, _ *ServerConn, req *Command) *Command {
		ran <- goroutineID()
		return NewResponse(req, Success, "")
	})
	c := dial(t, ts.addr, Options{})
	_, err := c.Invoke(testCtx(t), NewRequest(QueryMessage, nil, nil))
	require.NoError(t, err)
	first := <-ran
	require.Eventually(t, func() bool { return ts.srv.handlers.idleCount() == 1 }, 5*time.Second, time.Millisecond)
	_, err = c.Invoke(testCtx(t), NewRequest(QueryMessage, nil, nil))
	require.NoError(t, err)
	require.Equal(t, first, <-ran, "the parked goroutine ran the second request")

	require.Eventually(t, func() bool { return ts.srv.handlers.idleCount() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, ts.srv.Close())
	require.Equal(t, 0, ts.srv.handlers.idleCount())
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("goroutine "+first+" "))
	}, 5*time.Second, time.Millisecond, "the parked goroutine ended")
}

// Many answers at once on one connection, written by whichever handler
// finds no writer running, each arrive whole and to its request.
func TestConcurrentAnswersOneConnection(t *testing.T) {
	ts := startServer(t, echo)
	c := dial(t, ts.addr, Options{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			body := bytes.Repeat([]byte{byte(i)}, 64<<10)
			resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, map[string]string{"i": fmt.Sprint(i)}, body))
			if !assertNoError(t, err) {
				return
			}
			if resp.ExtFields["i"] != fmt.Sprint(i) || !bytes.Equal(resp.Body, body) {
				t.Errorf("request %d got another answer (%s, %d bytes)", i, resp.ExtFields["i"], len(resp.Body))
			}
		})
	}
	wg.Wait()
}
