// Package schedule holds the rules of delayed and timer messages: where a
// delayed message waits, when it is due, and the entry that delivers it.
//
// A delayed message (property DELAY, levels 1-18) or a timer message
// (TIMER_DELIVER_MS, TIMER_DELAY_SEC or TIMER_DELAY_MS) is not written to
// its topic. The leader rewrites it, as RocketMQ does, to topic
// SCHEDULE_TOPIC_XXXX with its real topic and queue in REAL_TOPIC and
// REAL_QID, in one of the schedule queues:
//
//   - queues 0-17 hold delay levels 1-18 (1 s ... 2 h);
//   - queues 18-137 are timer buckets: bucket 15k+d-1 holds messages that
//     wait d·16^k ms in it (d = 1 ... 15; k = 0 ... 7), 1 ms to 46 days.
//
// Every unit of a schedule queue carries, in place of a tags hash, its
// release time: when it leaves the queue (its record's store time plus the
// queue's delay). Units enter a queue in log order and wait the same
// delay, so release times grow along a queue, and the queue is served from
// its head like a FIFO: a cursor per queue, the schedule's replicated
// progress, says which unit is next.
//
// At release, a delay-level unit is due: the leader proposes a delivery
// entry (Delivery) that copies the message to its real topic and queue and
// moves the cursor. A timer message not due yet is copied instead to the
// bucket of the largest d·16^k not above the time left (a hop, in the same
// entry), which leaves less than 16^k: a message is placed at most once
// per hexadecimal digit of its delay in ms (a minute: 3 times, a day: 5),
// and is delivered within a scheduler tick of its due time, never before
// it. Hops copy the record, so every queue's units point at records in log
// order, like any consume queue's. Left with less than HopMin, a message
// waits at its queue's head instead (holding the units behind it back by
// at most HopMin).
//
// Apply enforces exactly-once: a delivery entry names the cursor it starts
// from, and applies only if the queue's cursor is there. An entry proposed
// twice (a leader change between proposal and commit) applies once; the
// other fails the same way on every replica.
package schedule

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// Topic is the topic delayed and timer messages wait in.
const Topic = "SCHEDULE_TOPIC_XXXX"

// Queue layout of Topic.
const (
	// Levels is the number of delay levels: queues 0 .. Levels-1.
	Levels = 18
	// TimerBase is the first timer bucket's queue.
	TimerBase int32 = Levels
	// TimerBuckets is the number of timer buckets: bucket 15k+d-1 waits
	// d·16^k ms (d = 1 ... 15, k = 0 ... 7).
	TimerBuckets = 15 * 8
	// QueueCount is the number of queues of Topic.
	QueueCount = Levels + TimerBuckets
)

// DefaultMaxDelay is the longest timer delay accepted by default (RocketMQ
// 5's timerMaxDelaySec, 3 days).
const DefaultMaxDelay = 72 * time.Hour

// MaxDelayLimit is the longest delay a timer may ask for (2^32 ms, less
// one: 49.7 days).
const MaxDelayLimit = time.Duration(1<<32-1) * time.Millisecond

// HopMin is the least time left for which a timer message hops to another
// bucket; with less, it waits at its queue's head.
const HopMin = 16 * time.Millisecond

// levelDelays are RocketMQ's default messageDelayLevel, in ms.
var levelDelays = [Levels]int64{
	1e3, 5e3, 10e3, 30e3,
	60e3, 2 * 60e3, 3 * 60e3, 4 * 60e3, 5 * 60e3, 6 * 60e3, 7 * 60e3, 8 * 60e3, 9 * 60e3, 10 * 60e3,
	20 * 60e3, 30 * 60e3, 3600e3, 2 * 3600e3,
}

// LevelDelay returns the delay of level (1-18).
func LevelDelay(level int) (time.Duration, bool) {
	if level < 1 || level > Levels {
		return 0, false
	}
	return time.Duration(levelDelays[level-1]) * time.Millisecond, true
}

// LevelQueue returns the queue of delay level (1-18).
func LevelQueue(level int) int32 { return int32(level - 1) }

// QueueDelay returns how long a unit waits in queue q, in ms.
func QueueDelay(q int32) (int64, bool) {
	switch {
	case q >= 0 && q < TimerBase:
		return levelDelays[q], true
	case q >= TimerBase && q < QueueCount:
		b := q - TimerBase
		k, d := b/15, int64(b%15+1)
		return d << (4 * k), true
	}
	return 0, false
}

// IsTimerQueue reports whether q is a timer bucket.
func IsTimerQueue(q int32) bool { return q >= TimerBase && q < QueueCount }

// Release returns the release time of a unit entering queue q at enterMs.
func Release(q int32, enterMs int64) int64 {
	d, _ := QueueDelay(q)
	return enterMs + d
}

// Bucket returns the timer bucket for a message due leftMs from now (> 0):
// the largest d·16^k not above leftMs.
func Bucket(leftMs int64) int32 {
	if leftMs < 1 {
		leftMs = 1
	}
	k := min((63-bits.LeadingZeros64(uint64(leftMs)))/4, TimerBuckets/15-1)
	d := min(leftMs>>(4*k), 15)
	return TimerBase + int32(15*k) + int32(d) - 1
}

// Errors for the properties of a message sent with a delay.
var (
	// ErrBadDelay is returned for a DELAY or TIMER_* property that does not
	// parse or is out of range.
	ErrBadDelay = errors.New("schedule: illegal delay")
)

// Kind says how a message is scheduled.
type Kind int

// Kinds.
const (
	None  Kind = iota // not delayed
	Level             // a delay level
	Timer             // a timer message, due at an absolute time
)

// Props are the scheduling properties of a message, as sent.
type Props struct {
	Delay      string // DELAY
	DeliverMs  string // TIMER_DELIVER_MS
	DelaySec   string // TIMER_DELAY_SEC
	DelayMs    string // TIMER_DELAY_MS
	MaxDelayMs int64  // the broker's limit for timers
}

// Plan is where a message sent now goes.
type Plan struct {
	Kind  Kind
	Level int   // for Level
	Due   int64 // for Timer: absolute due time, ms
	Queue int32 // schedule queue
}

// Decide reads a message's scheduling properties at nowMs. A delay level
// of 0 or less means no delay, as in RocketMQ; a level above 18 is clamped
// to 18. A timer due now or in the past is not scheduled. A timer further
// than MaxDelayMs away is refused.
func Decide(p Props, nowMs int64) (Plan, error) {
	switch {
	case p.DeliverMs != "" || p.DelaySec != "" || p.DelayMs != "":
		var due int64
		switch {
		case p.DeliverMs != "":
			v, err := strconv.ParseInt(p.DeliverMs, 10, 64)
			if err != nil {
				return Plan{}, fmt.Errorf("%w: TIMER_DELIVER_MS %q", ErrBadDelay, p.DeliverMs)
			}
			due = v
		case p.DelaySec != "":
			v, err := strconv.ParseInt(p.DelaySec, 10, 64)
			if err != nil || v < 0 || v > 1<<40 {
				return Plan{}, fmt.Errorf("%w: TIMER_DELAY_SEC %q", ErrBadDelay, p.DelaySec)
			}
			due = nowMs + v*1000
		default:
			v, err := strconv.ParseInt(p.DelayMs, 10, 64)
			if err != nil || v < 0 || v > 1<<50 {
				return Plan{}, fmt.Errorf("%w: TIMER_DELAY_MS %q", ErrBadDelay, p.DelayMs)
			}
			due = nowMs + v
		}
		left := due - nowMs
		if left <= 0 {
			return Plan{}, nil
		}
		maxMs := p.MaxDelayMs
		if maxMs <= 0 || maxMs > MaxDelayLimit.Milliseconds() {
			maxMs = MaxDelayLimit.Milliseconds()
		}
		if left > maxMs {
			return Plan{}, fmt.Errorf("%w: due in %v, more than the broker's maximum timer delay %v", ErrBadDelay,
				time.Duration(left)*time.Millisecond, time.Duration(maxMs)*time.Millisecond)
		}
		return Plan{Kind: Timer, Due: due, Queue: Bucket(left)}, nil
	case p.Delay != "":
		lvl, err := strconv.Atoi(p.Delay)
		if err != nil {
			return Plan{}, fmt.Errorf("%w: DELAY %q", ErrBadDelay, p.Delay)
		}
		if lvl <= 0 {
			return Plan{}, nil
		}
		lvl = min(lvl, Levels)
		return Plan{Kind: Level, Level: lvl, Queue: LevelQueue(lvl)}, nil
	}
	return Plan{}, nil
}

// Delivery is the head of a schedule entry: it takes Count units from the
// head of Queue, which must start at From. Each unit is delivered, hops, or
// is skipped: the entry's records, in unit order, are the delivered
// messages (rewritten to their real topic and queue) and the hops (copies
// to another schedule queue); Skips counts units whose record could not be
// read (removed by retention, or without a real topic), which the leader
// logs.
type Delivery struct {
	Queue int32
	From  int64
	Count int32
	Now   int64 // the proposing leader's clock, ms
	Skips int32
}

// DeliverySize is the encoded size of a Delivery.
const DeliverySize = 4 + 8 + 4 + 8 + 4

// AppendDelivery appends d's encoding; the records follow it.
//
//	| queue u32 | from i64 | count u32 | now i64 | skips u32 |
func AppendDelivery(dst []byte, d *Delivery) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(d.Queue))
	dst = binary.BigEndian.AppendUint64(dst, uint64(d.From))
	dst = binary.BigEndian.AppendUint32(dst, uint32(d.Count))
	dst = binary.BigEndian.AppendUint64(dst, uint64(d.Now))
	return binary.BigEndian.AppendUint32(dst, uint32(d.Skips))
}

// ErrBadDelivery is returned for a delivery entry that does not decode.
var ErrBadDelivery = errors.New("schedule: malformed delivery entry")

// DecodeDelivery splits a delivery payload into its head and its records.
func DecodeDelivery(b []byte) (Delivery, []byte, error) {
	if len(b) < DeliverySize {
		return Delivery{}, nil, fmt.Errorf("%w: %d bytes", ErrBadDelivery, len(b))
	}
	d := Delivery{
		Queue: int32(binary.BigEndian.Uint32(b)),
		From:  int64(binary.BigEndian.Uint64(b[4:])),
		Count: int32(binary.BigEndian.Uint32(b[12:])),
		Now:   int64(binary.BigEndian.Uint64(b[16:])),
		Skips: int32(binary.BigEndian.Uint32(b[24:])),
	}
	if _, ok := QueueDelay(d.Queue); !ok || d.From < 0 || d.Count <= 0 || d.Skips < 0 || d.Skips > d.Count {
		return Delivery{}, nil, fmt.Errorf("%w: queue %d from %d count %d skips %d", ErrBadDelivery, d.Queue, d.From, d.Count, d.Skips)
	}
	return d, b[DeliverySize:], nil
}
