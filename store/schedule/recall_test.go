package schedule

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRecallHandle(t *testing.T) {
	h := Handle{Topic: "T", BrokerName: "raftmq", Due: 1234, MsgID: "01ABC", Phy: 99}
	got, err := DecodeHandle(h.Encode())
	require.NoError(t, err)
	require.Equal(t, h, got)
	for _, bad := range []string{"", "!!", Handle{Topic: "T", Due: 0, MsgID: "x"}.Encode(), Handle{Topic: "", Due: 5, MsgID: "x"}.Encode(), "djIgVCBiIDEgeCAx"} {
		_, err := DecodeHandle(bad)
		require.ErrorIs(t, err, ErrBadHandle, "%q", bad)
	}
}

// The recalled set forgets a message RecallKeep after it was due, as
// deliveries move the horizon, and only then.
func TestRecalledForgets(t *testing.T) {
	var r Recalled
	require.NoError(t, r.Apply(Recall{Topic: "T", MsgID: "a", Due: 100, Now: 1}))
	require.True(t, r.Delivered(50))
	require.False(t, r.Delivered(50), "the same horizon")
	require.True(t, r.Delivered(100+RecallKeep))
	require.True(t, r.Has("T", "a"))
	r.Delivered(101 + RecallKeep)
	require.False(t, r.Has("T", "a"))
	back, err := DecodeRecalled(r.Encode())
	require.NoError(t, err)
	require.Equal(t, int64(101+RecallKeep), back.Horizon)
}
