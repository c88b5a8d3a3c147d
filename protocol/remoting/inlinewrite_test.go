package remoting

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// silentPeer accepts one connection and never reads from it; the test
// gets the accepted connection to close.
func silentPeer(t *testing.T) (addr string, accepted <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			ch <- c
		}
	}()
	return ln.Addr().String(), ch
}

// A request to a peer that never reads returns by its deadline, although
// its frame does not fit in the socket buffers: whether the caller or the
// writer goroutine writes it, the write cannot hold the caller past ctx.
// A request that can never be cancelled (context.Background) still
// returns once the connection is closed.
func TestInvokeToSilentPeerReturnsByDeadline(t *testing.T) {
	addr, accepted := silentPeer(t)
	c := dial(t, addr, Options{})
	peer := <-accepted
	t.Cleanup(func() { _ = peer.Close() })
	body := make([]byte, 12<<20) // more than both socket buffers hold

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Invoke(ctx, NewRequest(SendMessage, nil, body))
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrConnClosed), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Invoke to a peer that never reads did not return by its deadline")
	}

	// A new connection; a Background request's write blocks until Close.
	addr2, accepted2 := silentPeer(t)
	c2 := dial(t, addr2, Options{})
	peer2 := <-accepted2
	t.Cleanup(func() { _ = peer2.Close() })
	done2 := make(chan error, 1)
	go func() {
		_, err := c2.Invoke(context.Background(), NewRequest(SendMessage, nil, body))
		done2 <- err
	}()
	require.NoError(t, c2.Close())
	select {
	case err := <-done2:
		require.ErrorIs(t, err, ErrConnClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Invoke did not return after Close")
	}
}

// The caller's write deadline is cleared after its inline write: a
// later write by the writer goroutine (InvokeAsync without a timeout,
// past the first request's deadline) must not fail on it.
func TestInlineWriteDeadlineIsCleared(t *testing.T) {
	ts := startServer(t, echo)
	c := dial(t, ts.addr, Options{})
	dl := time.Now().Add(50 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	resp, err := c.Invoke(ctx, NewRequest(SendMessage, nil, []byte("first")))
	require.NoError(t, err)
	require.Equal(t, "first", string(resp.Body))
	for time.Now().Before(dl.Add(10 * time.Millisecond)) {
		time.Sleep(10 * time.Millisecond)
	}
	got := make(chan error, 1)
	require.NoError(t, c.InvokeAsync(NewRequest(SendMessage, nil, []byte("second")), 0, func(resp *Command, err error) {
		if err == nil && string(resp.Body) != "second" {
			err = fmt.Errorf("body %q", resp.Body)
		}
		got <- err
	}))
	require.NoError(t, <-got)
	// And an inline write after it, with a deadline long past: the
	// connection is still up.
	resp, err = c.Invoke(testCtx(t), NewRequest(SendMessage, nil, []byte("third")))
	require.NoError(t, err)
	require.Equal(t, "third", string(resp.Body))
	require.NoError(t, c.Err())
}

// Concurrent invokes on one connection, some writing inline and some
// joining a running writer's queue, are all answered with their own
// bodies; run with -race.
func TestConcurrentInvokesOneConn(t *testing.T) {
	ts := startServer(t, echo)
	c := dial(t, ts.addr, Options{})
	const workers, each = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				want := fmt.Sprintf("w%d-%d", w, i)
				// Background and a deadline write inline when no writer
				// runs; a cancel-only ctx always queues for the writer.
				var ctx context.Context = context.Background()
				var cancel context.CancelFunc = func() {}
				switch i % 3 {
				case 1:
					ctx, cancel = context.WithCancel(ctx)
				case 2:
					ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
				}
				resp, err := c.Invoke(ctx, NewRequest(SendMessage, nil, []byte(want)))
				cancel()
				if err == nil && string(resp.Body) != want {
					err = fmt.Errorf("got %q, want %q", resp.Body, want)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, c.Err())
}
