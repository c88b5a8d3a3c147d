package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/internal/vfs/vfstest"
)

// diskFullRecovery bounds the time from a node's disk filling to the
// group acknowledging sends again (docs/operating.md, "Disk full").
const diskFullRecovery = 10 * time.Second

// TestDiskFullProcesses runs three real broker processes, each with its
// data (and its broker.log) on a 64 MiB tmpfs, under a steady load, and
// fills the leader's disk twice: at once (a ballast takes every free
// byte), then slowly (the ballast grows until the node says it is full).
// Each time the full node stays alive and answers its status, sends are
// acknowledged again within diskFullRecovery (through another leader),
// the full node serves pulls, and it counts as not full by itself once the
// ballast is removed. At the end every acknowledged send is on every node
// at its offset, and none is stored twice.
func TestDiskFullProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g, fallback, _, cl := startTmpfsGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "diskfull"
	require.NoError(t, cl.CreateTopic(ctx, topic, 4))

	type ack struct {
		q   int32
		off int64
	}
	var (
		mu      sync.Mutex
		acks    = map[string]ack{}
		failed  atomic.Int64
		lastAck atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			pr := cl.NewProducer(client.ProducerOptions{Group: "diskfull", MaxRetries: 100, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
			body := make([]byte, 2048) // fills a disk faster
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("p%d-%d|", p, i)
				copy(body, key)
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				r, err := pr.Send(sctx, &client.Message{Topic: topic, QueueID: int32(i % 4), Body: append([]byte(nil), body...)})
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				lastAck.Store(time.Now().UnixNano())
				mu.Lock()
				acks[key] = ack{r.QueueID, r.QueueOffset}
				mu.Unlock()
			}
		}(p)
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()

	// leader returns the ready leader of the highest term (a node stalled
	// on a full disk may still believe it leads an older one).
	leader := func() uint64 {
		var id, term uint64
		for _, st := range g.Statuses() {
			if st != nil && st.LeaderReady && st.Status.Term > term {
				id, term = st.Status.ID, st.Status.Term
			}
		}
		return id
	}
	waitAck := func(after time.Time, what string) time.Duration {
		t.Helper()
		deadline := after.Add(diskFullRecovery)
		for lastAck.Load() < after.UnixNano() {
			require.True(t, time.Now().Before(deadline), "%s: no send acknowledged within %v", what, diskFullRecovery)
			time.Sleep(5 * time.Millisecond)
		}
		return time.Duration(lastAck.Load() - after.UnixNano())
	}
	alive := func(id uint64, what string) {
		t.Helper()
		for _, n := range g.Nodes {
			require.Empty(t, n.Exited(), "%s: node %d exited", what, n.ID)
		}
		_, err := g.Status(id)
		require.NoError(t, err, "%s: node %d does not answer its status", what, id)
	}
	freed := func(id uint64, ballast string) {
		t.Helper()
		require.NoError(t, os.Remove(ballast))
		require.Eventually(t, func() bool {
			st, err := g.Status(id)
			return err == nil && !st.DiskFull
		}, 10*time.Second, 20*time.Millisecond, "node %d still full after the ballast was removed", id)
	}
	waitAck(time.Now(), "start")

	// Fast: the leader's disk fills at once.
	l := leader()
	require.NotZero(t, l)
	t0 := time.Now()
	ballast := vfstest.FillDisk(t, g.Node(l).Dir)
	dt := waitAck(time.Now(), "fast fill")
	t.Logf("fast fill of node %d: sends acknowledged again %v after the disk filled", l, time.Since(t0).Round(time.Millisecond))
	_ = dt
	alive(l, "fast fill")
	st, err := g.Status(l)
	require.NoError(t, err)
	require.True(t, st.DiskFull, "node %d on a full disk does not say so", l)
	require.Eventually(t, func() bool { n := leader(); return n != 0 && n != l }, diskFullRecovery, 20*time.Millisecond,
		"leadership stayed on the full node")
	// The full node serves reads from what it has.
	pc := cl.NewPullConsumer("diskfull-read")
	r, err := pc.PullFrom(ctx, g.Nodes[l-1].Client, topic, 0, 0, 32, 0)
	require.NoError(t, err)
	require.NotEmpty(t, r.Messages, "the full node serves no pull")
	freed(l, ballast)
	// The reason is recorded: in broker.log, or, where its disk could not
	// take the line, on the supervisor's stderr.
	logged, _ := os.ReadFile(g.Nodes[l-1].LogPath)
	require.True(t, strings.Contains(string(logged), "disk full") || strings.Contains(fallback.String(), fmt.Sprintf("n%d| ", l)),
		"node %d's log says nothing of its full disk; fallback:\n%s", l, fallback.String())
	t.Logf("node %d: %d bytes of log on the supervisor's stderr while its disk was full", l, len(fallback.String()))
	waitAck(time.Now(), "after the fast fill")

	// Slow: the (new) leader's disk fills a few MiB at a time.
	m := leader()
	require.NotZero(t, m)
	dir := g.Node(m).Dir
	ballast = filepath.Join(dir, "ballast")
	f, err := os.Create(ballast)
	require.NoError(t, err)
	chunk := make([]byte, 2<<20)
	t0 = time.Now()
	for {
		st, err := g.Status(m)
		require.NoError(t, err)
		if st.DiskFull {
			break
		}
		if _, err := f.Write(chunk); err != nil {
			break // the device is full
		}
		time.Sleep(50 * time.Millisecond)
		require.Less(t, time.Since(t0), 30*time.Second, "node %d never said it was full", m)
	}
	f.Close()
	full := time.Now()
	require.Eventually(t, func() bool { n := leader(); return n != 0 && n != m }, diskFullRecovery, 20*time.Millisecond,
		"leadership stayed on the node over its write threshold")
	t.Logf("slow fill of node %d: full after %v, leadership handed to node %d after %v", m, full.Sub(t0).Round(time.Millisecond),
		leader(), time.Since(full).Round(time.Millisecond))
	waitAck(time.Now(), "slow fill")
	alive(m, "slow fill")
	freed(m, ballast)
	waitAck(time.Now(), "after the slow fill")
	stopLoad()

	// Every acknowledged send is on every node, once, at its offset.
	require.NoError(t, cl.CreateTopic(ctx, "diskfull-fence", 1))
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d sends acknowledged, %d failed (refused or timed out, each retried by the producer)", len(acks), failed.Load())
	require.Greater(t, len(acks), 100)
	for _, n := range g.Nodes {
		require.Eventually(t, func() bool {
			seen := map[string]ack{}
			dups := 0
			for q := int32(0); q < 4; q++ {
				for off := int64(0); ; {
					r, err := pc.PullFrom(ctx, n.Client, topic, q, off, 256, 0)
					if err != nil {
						return false
					}
					for _, m := range r.Messages {
						key := string(m.Body[:bytesIndex(m.Body, '|')+1])
						if prev, ok := seen[key]; ok && prev != (ack{q, m.QueueOffset}) {
							dups++
						}
						seen[key] = ack{q, m.QueueOffset}
					}
					if len(r.Messages) == 0 {
						break
					}
					off = r.NextBeginOffset
				}
			}
			require.Zero(t, dups, "node %d stores a send twice", n.ID)
			for key, a := range acks {
				if seen[key] != a {
					return false
				}
			}
			return true
		}, 20*time.Second, 200*time.Millisecond, "node %d lacks acknowledged sends", n.ID)
	}
}

func bytesIndex(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return len(b) - 1
}

// TestDiskFullRestart restarts a node whose disk filled while it was down:
// it opens, says it is full, and serves reads (README, "When the disk
// fills"), and takes writes again once space frees. Its queue holds 450
// messages, so the queue's file grew to 816 units with its last page a
// hole: recovery must not read that hole through the file's mapping (on a
// full tmpfs, a SIGBUS at every restart).
func TestDiskFullRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g, fallback, l, cl := startTmpfsGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, n = "restartfull", 450
	require.NoError(t, cl.CreateTopic(ctx, topic, 1))
	pr := cl.NewProducer(client.ProducerOptions{Group: "restartfull", MaxRetries: 20, Backoff: 10 * time.Millisecond})
	for i := 0; i < n; i++ {
		_, err := pr.Send(ctx, &client.Message{Topic: topic, QueueID: 0, Body: []byte(fmt.Sprintf("m%d", i))})
		require.NoError(t, err)
	}
	// A follower with every message stops; its disk fills; it restarts.
	f := uint64(1)
	if f == l {
		f = 2
	}
	pc := cl.NewPullConsumer("restartfull-read")
	count := func(id uint64) int {
		got := 0
		for off := int64(0); ; {
			r, err := pc.PullFrom(ctx, g.Nodes[id-1].Client, topic, 0, off, 256, 0)
			if err != nil || len(r.Messages) == 0 {
				return got
			}
			got += len(r.Messages)
			off = r.NextBeginOffset
		}
	}
	require.Eventually(t, func() bool { return count(f) == n }, 10*time.Second, 50*time.Millisecond, "node %d lacks messages", f)
	require.NoError(t, g.Stop(f, 10*time.Second))
	ballast := vfstest.FillDisk(t, g.Node(f).Dir)
	require.NoError(t, g.StartNode(f))

	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := g.Status(f)
		if err == nil && st.DiskFull {
			break
		}
		if ex := g.Nodes[f-1].Exited(); ex != "" || time.Now().After(deadline) {
			out := fallback.String() // its broker.log is on the full disk
			t.Fatalf("node %d restarted on a full disk: status: %v (full: %v), exited: %q; its first lines on stderr:\n%s",
				f, err, st != nil && st.DiskFull, ex, out[:min(len(out), 2000)])
		}
	}
	require.Equal(t, n, count(f), "node %d restarted on a full disk does not serve its messages", f)
	require.Empty(t, g.Nodes[f-1].Exited(), "node %d exited", f)

	require.NoError(t, os.Remove(ballast))
	require.Eventually(t, func() bool {
		st, err := g.Status(f)
		return err == nil && !st.DiskFull
	}, 10*time.Second, 50*time.Millisecond, "node %d still full after the ballast was removed", f)
	_, err := pr.Send(ctx, &client.Message{Topic: topic, QueueID: 0, Body: []byte("after")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count(f) == n+1 }, 10*time.Second, 50*time.Millisecond, "node %d does not catch up after space freed", f)
}

// startTmpfsGroup starts three broker processes, each on a 64 MiB tmpfs of
// its own (4 MiB segments, no warm-ahead, so a disk fills fast), waits for
// a leader and returns the group, the supervisor's stderr (node lines a
// full disk could not take), the leader and a client; all are stopped
// when the test ends.
func startTmpfsGroup(t *testing.T) (*localgroup.Group, *syncBuffer, uint64, *client.Client) {
	t.Helper()
	root := t.TempDir()
	for i := 1; i <= 3; i++ {
		dir := filepath.Join(root, fmt.Sprintf("n%d", i))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		vfstest.MountTmpfs(t, dir, 64<<20)
	}
	fallback := &syncBuffer{}
	g := localgroup.New(localgroup.Config{Binary: os.Args[0], Env: []string{"RAFTMQ_TEST_MAIN=1"}, Dir: root,
		BasePort: freeBasePort(t), Args: []string{"--segment-size", "4194304", "--warm-ahead", "-1"}, Stderr: fallback})
	require.NoError(t, g.Start())
	t.Cleanup(func() { _ = g.StopAll() })
	l, err := g.WaitLeader(20 * time.Second)
	require.NoError(t, err)
	cl, err := client.New(client.Options{Addrs: g.Addrs(), RequestTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return g, fallback, l, cl
}
