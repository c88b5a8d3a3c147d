package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/harness/localgroup"
)

// buildRaftmq builds the raftmq binary into a temporary directory, or
// skips the test if it cannot.
func buildRaftmq(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build raftmq: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "raftmq")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/raftmq/raftmq/cmd/raftmq").CombinedOutput()
	if err != nil {
		t.Skipf("cannot build raftmq: %v\n%s", err, out)
	}
	return bin
}

// freeBasePort finds a base port whose client, raft and HTTP neighbours
// (base+0..2, +10..12, +20..22) are free.
func freeBasePort(t *testing.T) int {
	t.Helper()
	for base := 30000 + os.Getpid()%1000*20; base < 60000; base += 131 {
		free := true
		for _, off := range []int{0, 1, 2, 10, 11, 12, 20, 21, 22} {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+off)))
			if err != nil {
				free = false
				break
			}
			_ = l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free ports")
	return 0
}

// TestPushConsumersSurviveLeaderKill runs three raftmq broker processes
// and two push consumers of one group while a producer sends; the leader
// is killed with SIGKILL and restarted mid-way. Every acknowledged message
// must reach a consumer (at least once: a failover may redeliver).
func TestPushConsumersSurviveLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds raftmq and starts processes")
	}
	g := localgroup.New(localgroup.Config{Binary: buildRaftmq(t), Dir: t.TempDir(), BasePort: freeBasePort(t), Nodes: 3})
	require.NoError(t, g.Start())
	t.Cleanup(func() { _ = g.StopAll() })
	_, err := g.WaitLeader(30 * time.Second)
	require.NoError(t, err)

	c := newClient(t, g.Addrs())
	createTopic(t, c, "T", 4)
	var mu sync.Mutex
	consumed := map[string]int{}
	fn := func(_ context.Context, ms []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			consumed[string(m.Body)]++
		}
		return client.ConsumeSuccess
	}
	o := options("G", "T")
	o.RebalanceInterval = time.Second
	o.HeartbeatInterval = time.Second
	a := start(t, g.Addrs(), o, fn)
	b := start(t, g.Addrs(), o, fn)

	const total = 300
	var acked []string
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		p := c.NewProducer(client.ProducerOptions{MaxRetries: 10})
		for i := range total {
			body := fmt.Sprint("m-", i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := p.Send(ctx, &client.Message{Topic: "T", QueueID: client.AnyQueue, Body: []byte(body)})
			cancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, body)
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= total/3
	}, 30*time.Second, 10*time.Millisecond)
	leader := g.Leader()
	require.NotZero(t, leader)
	require.NoError(t, g.Kill(leader))
	t.Logf("killed leader %d after %d acknowledged sends", leader, len(acked))
	time.Sleep(time.Second)
	require.NoError(t, g.StartNode(leader))
	<-sent

	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, body := range acked {
			if consumed[body] == 0 {
				out = append(out, body)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(missing()) == 0 }, 60*time.Second, 50*time.Millisecond,
		"acknowledged but never consumed: %v", missing())
	mu.Lock()
	dups := 0
	for _, n := range consumed {
		dups += n - 1
	}
	t.Logf("%d acknowledged, %d distinct consumed, %d redeliveries", len(acked), len(consumed), dups)
	mu.Unlock()
	require.NoError(t, a.Shutdown(ctxFor(t, 10*time.Second)))
	require.NoError(t, b.Shutdown(ctxFor(t, 10*time.Second)))
}
