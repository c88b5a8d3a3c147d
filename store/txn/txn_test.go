package txn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Phy: 1 << 40, Size: 1234, StoreMs: 1700000000000, Checks: 3, LastCheckMs: 1700000060000, ImmunityMs: 30000, Group: "pg-é"}
	got, err := DecodeRecord(r.Encode())
	require.NoError(t, err)
	require.Equal(t, r, got)
	_, err = DecodeRecord(r.Encode()[:10])
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestOpRoundTrip(t *testing.T) {
	op := Op{Action: Rollback, HalfOffset: 42, Now: 99}
	got, rest, err := DecodeOp(append(AppendOp(nil, &op), "recs"...))
	require.NoError(t, err)
	require.Equal(t, op, got)
	require.Equal(t, "recs", string(rest))
	for _, bad := range []Op{{Action: 0}, {Action: 5}, {Action: Commit, HalfOffset: -1}} {
		_, _, err := DecodeOp(AppendOp(nil, &bad))
		require.ErrorIs(t, err, ErrCorrupt, "%+v", bad)
	}
	_, _, err = DecodeOp([]byte{1, 2})
	require.ErrorIs(t, err, ErrCorrupt)
	require.Equal(t, "discard", Discard.String())
}
