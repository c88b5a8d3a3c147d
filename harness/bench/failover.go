package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/internal/vfs"
)

// FailoverResult summarizes a kill -9 campaign.
type FailoverResult struct {
	Kills int `json:"kills"`
	// Recovery is, per kill, the time from SIGKILL of the leader to the
	// first send acknowledged afterwards, in milliseconds.
	Recovery []float64 `json:"recoveryMs"`
	P50      float64   `json:"p50ms"`
	Max      float64   `json:"maxms"`
	Acked    int       `json:"acked"`
	// Lost counts acknowledged messages missing (or different) on some
	// node at their acknowledged offset after the campaign; Duplicated
	// counts messages found at more than one offset.
	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	// LogsAgree is true when every node's committed log is byte-identical
	// up to the lowest last index (checked on the stopped nodes' files).
	LogsAgree bool   `json:"logsAgree"`
	Problem   string `json:"problem,omitempty"`
	// Series (acknowledged sends, failures and latency per step) and
	// Windows (each kill) are the run's timeline, for the HTML report.
	Series  []Interval   `json:"-"`
	Windows []KillWindow `json:"-"`
}

func (r FailoverResult) String() string {
	return fmt.Sprintf("failover: %d kill -9s of the leader under load: new leader acknowledging after p50 %.0f ms, max %.0f ms; %d acknowledged sends, %d lost, %d duplicated, logs agree: %v %s",
		r.Kills, r.P50, r.Max, r.Acked, r.Lost, r.Duplicated, r.LogsAgree, r.Problem)
}

type ack struct {
	q   int32
	off int64
}

// Failover kills the leader of a running local group kills times under a
// steady load of one-at-a-time sends from several producers, restarting
// the killed node each time, then verifies every acknowledged send on
// every node and compares the logs. It stops the group at the end.
func Failover(ctx context.Context, g *localgroup.Group, kills, producers int, progress io.Writer) (FailoverResult, error) {
	var res FailoverResult
	cl, err := client.New(client.Options{Addrs: g.Addrs(), RequestTimeout: 2 * time.Second})
	if err != nil {
		return res, err
	}
	defer cl.Close()
	if _, err := g.WaitLeader(20 * time.Second); err != nil {
		return res, err
	}
	const topic = "failover"
	if err := cl.CreateTopic(ctx, topic, 4); err != nil {
		return res, fmt.Errorf("failover: create topic: %w", err)
	}
	start := time.Now()
	lat := newRecorder(start)
	cnt := counters{rec: lat}
	var (
		mu      sync.Mutex
		acks    = map[string]ack{}
		lastAck atomic.Int64 // unix nanos of the latest acknowledgement
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			pr := cl.NewProducer(client.ProducerOptions{Group: "failover", MaxRetries: 100, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("p%d-%d", p, i)
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t0 := time.Now()
				r, err := pr.Send(sctx, &client.Message{Topic: topic, QueueID: int32(i % 4), Body: []byte(body)})
				cancel()
				if err != nil {
					cnt.fail(err)
					continue // not acknowledged: nothing to check
				}
				lat.add(time.Since(t0), 1)
				lastAck.Store(time.Now().UnixNano())
				mu.Lock()
				acks[body] = ack{r.QueueID, r.QueueOffset}
				mu.Unlock()
			}
		}(p)
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	for k := 0; k < kills; k++ {
		leader, err := g.WaitLeader(20 * time.Second)
		if err != nil {
			return res, err
		}
		time.Sleep(300 * time.Millisecond) // load on the new leader
		t0 := time.Now()
		if err := g.Kill(leader); err != nil {
			return res, err
		}
		killed := time.Now().UnixNano()
		for lastAck.Load() < killed {
			if time.Since(t0) > 30*time.Second {
				return res, fmt.Errorf("failover: no acknowledgement within 30s of killing node %d", leader)
			}
			time.Sleep(time.Millisecond)
		}
		acked := time.Unix(0, lastAck.Load())
		dt := float64(acked.Sub(t0).Microseconds()) / 1000
		res.Recovery = append(res.Recovery, dt)
		res.Windows = append(res.Windows, KillWindow{Node: leader, At: t0.Sub(start).Seconds(), Recovered: acked.Sub(start).Seconds()})
		if progress != nil {
			fmt.Fprintf(progress, "kill %d/%d: node %d killed, sends acknowledged again after %.0f ms\n", k+1, kills, leader, dt)
		}
		if err := g.StartNode(leader); err != nil {
			return res, err
		}
		// Let it catch up before the next round.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			st, err := g.Status(leader)
			if err == nil && st.Status.Applied > 0 && st.Status.Applied+1000 >= st.Status.Commit {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	res.Series = timeline(lat, time.Since(start))
	res.Kills = kills
	s := slices.Clone(res.Recovery)
	slices.Sort(s)
	if len(s) > 0 {
		res.P50, res.Max = (s[(len(s)-1)/2]+s[len(s)/2])/2, s[len(s)-1] // the median: the middle two averaged when even
	}
	mu.Lock()
	res.Acked = len(acks)
	mu.Unlock()

	// Every node must hold every acknowledged message at its offset.
	if _, err := g.WaitLeader(20 * time.Second); err != nil {
		return res, err
	}
	if err := cl.CreateTopic(ctx, "failover-fence", 1); err != nil { // commits everything before it
		return res, err
	}
	time.Sleep(time.Second)
	pc := cl.NewPullConsumer("failover-check")
	for _, n := range g.Nodes {
		seen := map[string]ack{}
		for q := int32(0); q < 4; q++ {
			for off := int64(0); ; {
				r, err := pc.PullFrom(ctx, n.Client, topic, q, off, 256, 0)
				if err != nil {
					return res, fmt.Errorf("failover: read node %d: %w", n.ID, err)
				}
				for _, m := range r.Messages {
					if prev, ok := seen[string(m.Body)]; ok && prev != (ack{q, m.QueueOffset}) {
						res.Duplicated++
					}
					seen[string(m.Body)] = ack{q, m.QueueOffset}
				}
				if len(r.Messages) == 0 {
					break
				}
				off = r.NextBeginOffset
			}
		}
		mu.Lock()
		for body, a := range acks {
			if seen[body] != a {
				res.Lost++
			}
		}
		mu.Unlock()
	}
	if err := g.StopAll(); err != nil {
		res.Problem = err.Error()
	}
	agree, why, err := LogsAgree(g)
	if err != nil {
		return res, err
	}
	res.LogsAgree = agree
	if !agree {
		res.Problem += " " + why
	}
	return res, nil
}

// LogsAgree compares the stopped nodes' commitlogs entry by entry (term,
// position, CRC-checked body) up to the lowest last index.
func LogsAgree(g *localgroup.Group) (bool, string, error) {
	type ent struct {
		term uint64
		pos  int64
		sum  [32]byte
	}
	logs := make([]map[uint64]ent, len(g.Nodes))
	last := make([]uint64, len(g.Nodes))
	for i, n := range g.Nodes {
		m := map[uint64]ent{}
		_, err := commitlog.Inspect(vfs.ReadOnly(vfs.Default()), filepath.Join(n.Dir, "commitlog"), func(e commitlog.EntryRef) error {
			m[e.Index] = ent{e.Term, e.Pos, sha256.Sum256(e.Body)}
			last[i] = max(last[i], e.Index)
			return nil
		})
		if err != nil {
			return false, "", fmt.Errorf("inspect node %d: %w", n.ID, err)
		}
		logs[i] = m
	}
	hi := slices.Min(last)
	for idx := uint64(1); idx <= hi; idx++ {
		a, ok := logs[0][idx]
		for i := 1; i < len(logs); i++ {
			b, ok2 := logs[i][idx]
			if ok != ok2 || (ok && (a.term != b.term || a.pos != b.pos || a.sum != b.sum)) {
				return false, fmt.Sprintf("entry %d differs between node %d and node %d", idx, g.Nodes[0].ID, g.Nodes[i].ID), nil
			}
		}
	}
	return true, "", nil
}
