package vfs

import (
	"testing"
)

// A virtual ballast takes space as a file would: usage counts it, and a
// write it leaves no room for fails with ErrNoSpace; without it writes go
// through.
func TestBallast(t *testing.T) {
	mem := NewMem()
	mem.SetCapacity(1 << 20)
	b := WithBallast(mem, "/")
	f, err := b.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 100<<10), 0); err != nil {
		t.Fatal(err)
	}
	u0, _ := b.DiskUsage("/")
	b.SetBallast(800 << 10)
	u, _ := b.DiskUsage("/")
	if u.Free != u0.Free-800<<10 || u.Used != u0.Used+800<<10 {
		t.Fatalf("usage with a ballast %+v, without %+v", u, u0)
	}
	if _, err := f.WriteAt(make([]byte, 200<<10), 100<<10); !IsNoSpace(err) {
		t.Fatalf("write past the ballast: %v, want no space", err)
	}
	if _, err := f.WriteAt(make([]byte, 50<<10), 100<<10); err != nil {
		t.Fatalf("write within the room left: %v", err)
	}
	b.SetBallast(2 << 20) // more than the device has: takes all of it
	if u, _ := b.DiskUsage("/"); u.Free != 0 {
		t.Fatalf("free %d with a ballast larger than the device", u.Free)
	}
	if _, err := b.Create("/g"); !IsNoSpace(err) {
		t.Fatalf("create on a full device: %v", err)
	}
	b.SetBallast(0)
	if _, err := f.WriteAt(make([]byte, 200<<10), 150<<10); err != nil {
		t.Fatalf("write with no ballast: %v", err)
	}
}
