package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBucketIsTheLargestDelayNotAboveTheTimeLeft(t *testing.T) {
	for _, left := range []int64{1, 2, 3, 4, 5, 7, 8, 12, 15, 16, 47, 48, 49, 999, 1000, 5000, 60_000, 3_600_000, 72 * 3_600_000, 1<<32 - 1} {
		q := Bucket(left)
		require.True(t, IsTimerQueue(q), "left %d: queue %d", left, q)
		d, ok := QueueDelay(q)
		require.True(t, ok)
		require.LessOrEqual(t, d, left, "left %d: bucket delay %d", left, d)
		if q+1 < QueueCount {
			next, _ := QueueDelay(q + 1)
			require.Greater(t, next, left, "left %d: a larger bucket %d fits", left, next)
		}
		// What is left after the bucket is below its power of 16.
		require.Less(t, left-d, max(d, 1), "left %d", left)
	}
}

func TestHopsPerDelay(t *testing.T) {
	for _, delay := range []time.Duration{100 * time.Millisecond, 5 * time.Second, time.Minute, time.Hour, 72 * time.Hour} {
		left, hops := delay.Milliseconds(), 0
		for left >= HopMin.Milliseconds() {
			d, _ := QueueDelay(Bucket(left))
			left -= d
			hops++
		}
		require.LessOrEqual(t, hops, 8, "delay %v", delay)
		t.Logf("delay %v: %d placements", delay, hops)
	}
}

func TestDecide(t *testing.T) {
	p, err := Decide(Props{Delay: "3"}, 1000)
	require.NoError(t, err)
	require.Equal(t, Plan{Kind: Level, Level: 3, Queue: 2}, p)
	p, err = Decide(Props{Delay: "99"}, 1000)
	require.NoError(t, err)
	require.Equal(t, 18, p.Level)
	p, err = Decide(Props{Delay: "0"}, 1000)
	require.NoError(t, err)
	require.Equal(t, None, p.Kind)
	_, err = Decide(Props{Delay: "x"}, 1000)
	require.ErrorIs(t, err, ErrBadDelay)

	p, err = Decide(Props{DelayMs: "5000"}, 1000)
	require.NoError(t, err)
	require.Equal(t, Timer, p.Kind)
	require.EqualValues(t, 6000, p.Due)
	require.Equal(t, Bucket(5000), p.Queue)
	p, err = Decide(Props{DelaySec: "2"}, 1000)
	require.NoError(t, err)
	require.EqualValues(t, 3000, p.Due)
	p, err = Decide(Props{DeliverMs: "500"}, 1000)
	require.NoError(t, err)
	require.Equal(t, None, p.Kind, "a timer in the past is not scheduled")
	_, err = Decide(Props{DelaySec: "4000", MaxDelayMs: 3600_000}, 1000)
	require.ErrorIs(t, err, ErrBadDelay, "beyond the maximum")
	_, err = Decide(Props{DelayMs: "-1"}, 1000)
	require.ErrorIs(t, err, ErrBadDelay)
}

func TestDeliveryRoundTrip(t *testing.T) {
	d := Delivery{Queue: TimerBase + 4, From: 77, Count: 9, Now: 123456789, Skips: 2}
	b := append(AppendDelivery(nil, &d), "records"...)
	got, rest, err := DecodeDelivery(b)
	require.NoError(t, err)
	require.Equal(t, d, got)
	require.Equal(t, "records", string(rest))
	for _, bad := range []Delivery{{Queue: QueueCount, Count: 1}, {Queue: 0, Count: 0}, {Queue: 0, Count: 1, Skips: 2}, {Queue: 0, From: -1, Count: 1}} {
		_, _, err := DecodeDelivery(AppendDelivery(nil, &bad))
		require.ErrorIs(t, err, ErrBadDelivery, "%+v", bad)
	}
	_, _, err = DecodeDelivery(b[:5])
	require.ErrorIs(t, err, ErrBadDelivery)
}
