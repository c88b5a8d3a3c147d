package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/jepsen/history"
)

// The disk-full nemesis. Where a tmpfs can be mounted (root), each node's
// data directory (its broker.log too) is a tmpfs of diskFullSize, mounted
// before the nodes start, and a fault fills one node's device with a
// ballast file. Elsewhere the brokers are the mutant build with the fault
// endpoint, and the ballast is virtual (vfs.BallastFS, set through the
// fault endpoint): the node's commit log, consume queues and index see a
// full device, its bbolt file and log do not. Either way the ballast takes
// every free byte at once, or a tenth of the free space every
// diskFullEvery (full in about a second, passing the write threshold on
// the way), and the heal removes it. The node must stay up, refuse writes
// with a disk-full answer, hand leadership to a member with space if it
// leads, and take writes again by itself once the ballast is gone; the
// availability checker holds the group to checker.DiskFullRecovery.

const (
	diskFullSize  = 256 << 20
	diskFullEvery = 100 * time.Millisecond
	ballastName   = "jepsen-ballast"
)

// mountDiskFull mounts a tmpfs on each node's directory. The returned
// undo, called after the nodes stopped, copies each node's broker.log out
// (to nodes/nN.broker.log) and unmounts.
func mountDiskFull(g *localgroup.Group) (undo func(), err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("jepsen: the disk-full nemesis needs root: it mounts a tmpfs on each node's data directory")
	}
	var mounted []*localgroup.Node
	undo = func() {
		for _, n := range mounted {
			_ = copyFile(n.LogPath, filepath.Join(filepath.Dir(n.Dir), filepath.Base(n.Dir)+".broker.log"))
			_ = unix.Unmount(n.Dir, unix.MNT_DETACH)
		}
	}
	for _, n := range g.Nodes {
		if err := os.MkdirAll(n.Dir, 0o700); err != nil {
			undo()
			return nil, err
		}
		if err := unix.Mount("tmpfs", n.Dir, "tmpfs", 0, fmt.Sprintf("size=%d", diskFullSize)); err != nil {
			undo()
			return nil, fmt.Errorf("jepsen: disk-full nemesis: mount a tmpfs on %s: %w", n.Dir, err)
		}
		mounted = append(mounted, n)
	}
	return undo, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// diskFull fills one node's device (the leader's more often than not).
func (e *env) diskFull(ctx context.Context, ev history.Event) (*fault, error) {
	n, what := e.pick(e.rng.IntN(3) != 0)
	slow := e.rng.IntN(2) == 0
	if !e.diskTmpfs {
		return e.diskBallast(ctx, ev, n, what, slow)
	}
	path := filepath.Join(e.g.Nodes[n-1].Dir, ballastName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("jepsen: disk-full: %w", err)
	}
	ev.Nodes = []int{n}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if slow {
		step := 1 << 20
		var st unix.Statfs_t
		if err := unix.Statfs(e.g.Nodes[n-1].Dir, &st); err == nil {
			step = max(step, int(st.Bavail*uint64(st.Bsize)/10))
		}
		ev.Description = fmt.Sprintf("fill %s n%d's disk slowly (%d MiB every %v)", what, n, step>>20, diskFullEvery)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(diskFullEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				if full, err := fill(f, step); full || err != nil {
					if err != nil {
						e.log("disk-full: ballast", "node", n, "err", err)
					}
					return
				}
			}
		}()
	} else {
		ev.Description = fmt.Sprintf("fill %s n%d's disk at once", what, n)
		if _, err := fill(f, diskFullSize); err != nil {
			f.Close()
			_ = os.Remove(path)
			return nil, fmt.Errorf("jepsen: disk-full: %w", err)
		}
	}
	return &fault{ev: ev, heal: func() error {
		close(stop)
		wg.Wait()
		f.Close()
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) { // a wipe may have taken it
			return fmt.Errorf("jepsen: disk-full: remove the ballast: %w", err)
		}
		return nil
	}}, nil
}

// fill appends up to n bytes to f, and every last byte the device has
// once it is full; it reports whether the device is full.
func fill(f *os.File, n int) (full bool, err error) {
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(buf))
		if _, err := f.Write(buf[:k]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return false, err
			}
			for _, sz := range []int{64 << 10, 4096, 512, 1} {
				for {
					if _, err := f.Write(buf[:sz]); err != nil {
						break
					}
				}
			}
			return true, nil
		}
		n -= k
	}
	return false, nil
}

// DiskFullAvailable reports whether this process can mount a tmpfs, which
// the disk-full nemesis needs; the scenario sets include its scenarios
// only then.
var DiskFullAvailable = sync.OnceValue(func() bool {
	if os.Geteuid() != 0 {
		return false
	}
	dir, err := os.MkdirTemp("", "raftmq-tmpfs-probe")
	if err != nil {
		return false
	}
	defer os.Remove(dir)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		return false
	}
	return unix.Unmount(dir, unix.MNT_DETACH) == nil
})

// diskBallast is diskFull through the fault endpoint's virtual ballast.
func (e *env) diskBallast(ctx context.Context, ev history.Event, n int, what string, slow bool) (*fault, error) {
	ev.Nodes = []int{n}
	st, err := e.g.Status(uint64(n))
	if err != nil {
		return nil, fmt.Errorf("jepsen: disk-full: status of n%d: %w", n, err)
	}
	free := max(st.DiskFree, 1<<20)
	set := func(b int64) error { return e.faultReq(ctx, n, cluster.FaultRequest{DiskBallastBytes: b}) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if slow {
		step := free / 10
		ev.Description = fmt.Sprintf("fill %s n%d's disk slowly (virtual ballast, %d MiB every %v)", what, n, step>>20, diskFullEvery)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(diskFullEvery)
			defer t.Stop()
			for b := step; b <= free+step; b += step {
				if err := set(b); err != nil {
					e.log("disk-full: ballast", "node", n, "err", err)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
	} else {
		ev.Description = fmt.Sprintf("fill %s n%d's disk at once (virtual ballast)", what, n)
		if err := set(1 << 62); err != nil {
			return nil, err
		}
	}
	return &fault{ev: ev, heal: func() error {
		close(stop)
		wg.Wait()
		return set(-1)
	}}, nil
}
