package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
)

// syncHookFS calls hook around SyncFS; a non-nil error from hook fails the
// SyncFS (the process "dies" there).
type syncHookFS struct {
	vfs.FS
	hook func(before bool) error
}

func (h *syncHookFS) SyncFS(path string) error {
	if err := h.hook(true); err != nil {
		return err
	}
	if err := h.FS.SyncFS(path); err != nil {
		return err
	}
	return h.hook(false)
}

var errCrashed = fmt.Errorf("crashed here: %w", vfs.ErrInjected)

// TestCrashMidCheckpointWithThousandsOfQueues kills the store (a power
// loss: unsynced writes kept at random) at every point of a checkpoint
// while 2,048 queues are dirty: after the capture with more sends applied
// since, after the file-system sync but before bbolt's commit, and just
// after the commit. Every acknowledged message must then be in its queue
// at the offset it was given, and every queue must hold exactly the
// messages the log says (no unit lost, none extra). At "mid-mark", sends
// are applied while the checkpoint writes the queues' tails (which it does
// beside Apply, after the capture), and the crash comes before the sync.
func TestCrashMidCheckpointWithThousandsOfQueues(t *testing.T) {
	const topics, queues = 256, 8
	points := []string{"before-sync", "after-sync", "after-commit", "mid-mark"}
	for seed := uint64(0); seed < 8; seed++ {
		point := points[seed%4]
		t.Run(fmt.Sprintf("seed%d-%s", seed, point), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			mem := vfs.NewMem()
			var sa *Standalone
			type acked struct {
				r    MessageResult
				body []byte
			}
			var ok []acked
			n := 0
			var put1 func(int)
			put := func(count int) {
				for ; count > 100; count -= 100 {
					put1(100)
				}
				put1(count)
			}
			put1 = func(count int) {
				var batch []*message.Message
				for range count {
					batch = append(batch, msg(fmt.Sprintf("t%03d", rng.IntN(topics)), int32(rng.IntN(queues)), n, "", fmt.Sprintf("U%d", n)))
					n++
				}
				rs, err := sa.Put(batch...)
				require.NoError(t, err)
				for i, r := range rs {
					require.NoError(t, r.Err)
					ok = append(ok, acked{r, batch[i].Body})
				}
			}
			var clone *vfs.MemFS
			var meta []byte
			armed := false
			snap := func() {
				clone = mem.CrashClone(rng, rng.Float64())
				var err error
				meta, err = os.ReadFile(filepath.Join(sa.cfg.Dir, "meta.db"))
				require.NoError(t, err)
			}
			// At "mid-mark", the checkpoint's first write to a consume
			// queue (the capture is taken by then) starts sends beside it;
			// the sync waits for them, then the process dies.
			var marking atomic.Bool
			var sendsDone chan struct{}
			inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
				if op == vfs.OpWrite && strings.Contains(path, "consumequeue") && marking.CompareAndSwap(true, false) {
					sendsDone = make(chan struct{})
					go func() {
						defer close(sendsDone)
						put(600)
					}()
				}
				return nil
			})
			fs := &syncHookFS{FS: vfs.WithErrors(mem, inj), hook: func(before bool) error {
				switch {
				case !armed:
					return nil
				case before && point == "mid-mark":
					require.NotNil(t, sendsDone, "the checkpoint wrote no consume queue")
					<-sendsDone
					snap()
					return errCrashed
				case before && point == "before-sync":
					put(300) // applied after the capture, before the sync
					snap()
					return errCrashed
				case !before && point == "after-sync":
					snap()
					return errCrashed
				}
				return nil
			}}
			cfg := testConfig(t, fs)
			cfg.PersistInterval = time.Hour // checkpoints only when the test says
			cfg.CQUnitsPerFile = 8          // queues roll files too
			cfg.IndexSlots, cfg.IndexMaxEntries = 512, 4096
			sa = openSA(t, cfg)
			for i := range topics {
				createTopic(t, sa, fmt.Sprintf("t%03d", i), queues)
			}
			require.NoError(t, sa.Persist())
			for range 4 {
				put(1500) // most of the 2,048 queues dirty at every checkpoint
				require.NoError(t, sa.Persist())
			}
			put(1500)
			armed = true
			marking.Store(point == "mid-mark")
			err := sa.Persist()
			if point == "after-commit" {
				require.NoError(t, err)
				snap()
			} else {
				require.ErrorIs(t, err, vfs.ErrInjected)
			}
			close(sa.stop)
			sa.wg.Wait()
			require.NoError(t, sa.db.Close())
			require.NoError(t, os.WriteFile(filepath.Join(sa.cfg.Dir, "meta.db"), meta, 0o644))

			cfg.FS = clone
			sa2, err := OpenStandalone(cfg)
			require.NoError(t, err)
			defer sa2.Close()
			perQueue := map[queueKey]int64{}
			for _, a := range ok {
				perQueue[queueKey{a.r.Topic, a.r.QueueID}]++
				r, err := sa2.GetMessages(a.r.Topic, a.r.QueueID, a.r.QueueOffset, 1, 1<<30, nil)
				require.NoError(t, err)
				require.Equal(t, Found, r.Status, "acked message %+v missing", a.r)
				m, _, err := message.Decode(r.Records[0])
				require.NoError(t, err)
				require.Equal(t, a.body, m.Body, "%s/%d offset %d", a.r.Topic, a.r.QueueID, a.r.QueueOffset)
			}
			for i := range topics {
				for q := range int32(queues) {
					topic := fmt.Sprintf("t%03d", i)
					require.Equal(t, perQueue[queueKey{topic, q}], sa2.MaxOffset(topic, q), "%s/%d holds exactly the log's messages", topic, q)
				}
			}
		})
	}
}
