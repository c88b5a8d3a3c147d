package raftlog

import "time"

// Clock is where a Node gets its time: the tick that drives raft's
// elections and heartbeats, the timer of held commit-only appends, and the
// backoff while waiting for disk space. Config.Clock defaults to the real
// clock (RealClock); tests pass a clock they advance by hand, so that every
// tick and every timer firing is a step the test takes.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
	NewTimer(d time.Duration) Timer
}

// Ticker is the part of time.Ticker a Node uses.
type Ticker interface {
	Chan() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// Timer is the part of time.Timer a Node uses.
type Timer interface {
	Chan() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// RealClock is the wall clock (package time).
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// NewTicker is time.NewTicker.
func (RealClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// NewTimer is time.NewTimer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) Chan() <-chan time.Time { return r.t.C }
func (r realTicker) Reset(d time.Duration)  { r.t.Reset(d) }
func (r realTicker) Stop()                  { r.t.Stop() }

type realTimer struct{ t *time.Timer }

func (r realTimer) Chan() <-chan time.Time     { return r.t.C }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
