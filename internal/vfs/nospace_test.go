package vfs

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestIsNoSpace(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("other"), false},
		{fmt.Errorf("write: %w", ErrNoSpace), true},
		{fmt.Errorf("bbolt: %w", syscall.ENOSPC), true},
		{syscall.EDQUOT, true},
		{syscall.EIO, false},
	} {
		if got := IsNoSpace(c.err); got != c.want {
			t.Errorf("IsNoSpace(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A write on a full device waits, reports the stall once, and completes
// when space is freed; Stop ends the wait with the error.
func TestStallFSWaitsForSpace(t *testing.T) {
	mem := NewMem()
	mem.SetCapacity(8 << 10)
	var stalls, resumes atomic.Int32
	stop := make(chan struct{})
	fs := Stall(mem, StallOptions{Stop: stop, MaxBackoff: 20 * time.Millisecond,
		OnStall: func(string, error) { stalls.Add(1) }, OnResume: func() { resumes.Add(1) }})
	ballast, err := mem.Create("/ballast")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ballast.WriteAt(make([]byte, 7<<10), 0); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("/data")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.WriteAt(make([]byte, 4<<10), 0)
		done <- err
	}()
	time.Sleep(150 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("write on a full device returned %v, want it to wait", err)
	default:
	}
	if !fs.Stalled() || stalls.Load() != 1 {
		t.Fatalf("stalled %v, stalls %d; want true, 1 (reported once, not per retry)", fs.Stalled(), stalls.Load())
	}
	if err := mem.Remove("/ballast"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write after space was freed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("write still waiting after space was freed")
	}
	if fs.Stalled() || resumes.Load() != 1 {
		t.Fatalf("stalled %v, resumes %d after the write", fs.Stalled(), resumes.Load())
	}
	if sz, _ := f.Size(); sz != 4<<10 {
		t.Fatalf("size %d, want %d", sz, 4<<10)
	}

	// Stop ends a wait with the no-space error.
	if _, err := mem.Create("/ballast2"); err != nil {
		t.Fatal(err)
	}
	b2, _ := mem.OpenReadWrite("/ballast2")
	if _, err := b2.WriteAt(make([]byte, 4<<10), 0); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := f.WriteAt(make([]byte, 4<<10), 4<<10)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	select {
	case err := <-done:
		if !IsNoSpace(err) {
			t.Fatalf("write stopped while waiting: %v, want a no-space error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not end the wait")
	}
}
