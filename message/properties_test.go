package message

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncodeProperties(t *testing.T) {
	require.Empty(t, EncodeProperties(nil))
	require.Empty(t, EncodeProperties(map[string]string{}))
	require.Equal(t, "KEYS\x01k1 k2\x02TAGS\x01a\x02UNIQ_KEY\x01id\x02",
		EncodeProperties(map[string]string{PropertyUniqKey: "id", PropertyTags: "a", PropertyKeys: "k1 k2"}))
	require.Equal(t, "e\x01\x02", EncodeProperties(map[string]string{"e": ""}))
}

func TestDecodeProperties(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
	}{
		{"", nil},
		{"\x02", nil},
		{"a\x01b", map[string]string{"a": "b"}},
		{"a\x01b\x02", map[string]string{"a": "b"}},
		{"b\x01\x02a\x01x y\x02", map[string]string{"a": "x y", "b": ""}},
		{"a\x01b\x02c\x01d", map[string]string{"a": "b", "c": "d"}},
	}
	for _, tt := range tests {
		got, err := DecodeProperties(tt.in)
		require.NoError(t, err, "%q", tt.in)
		require.Equal(t, tt.want, got, "%q", tt.in)
	}
	for _, bad := range []string{
		"a", "a\x02", "\x01b", "a\x01b\x02\x02", "a\x01b\x02\x02c\x01d", "a\x01b\x01c",
		"a\x01b\x02a\x01c\x02", "\x02\x02",
	} {
		_, err := DecodeProperties(bad)
		require.ErrorIs(t, err, ErrBadProperty, "%q", bad)
	}
}

func TestPropertyValue(t *testing.T) {
	raw := []byte("KEYS\x01k1 k2\x02TAGS\x01\x02UNIQ_KEY\x01id")
	for key, want := range map[string]string{"KEYS": "k1 k2", "TAGS": "", "UNIQ_KEY": "id"} {
		got, ok := PropertyValue(raw, key)
		require.True(t, ok, key)
		require.Equal(t, want, got)
	}
	for _, key := range []string{"", "KEY", "KEYSX", "k1 k2", "id"} {
		_, ok := PropertyValue(raw, key)
		require.False(t, ok, key)
	}
	_, ok := PropertyValue(nil, "a")
	require.False(t, ok)
	// Malformed pairs are skipped.
	got, ok := PropertyBytes([]byte("junk\x02\x02a\x01b"), "a")
	require.True(t, ok)
	require.Equal(t, "b", string(got))
	// RawPropertyValue is the same lookup on a string.
	for _, raw := range []string{string(raw), "junk\x02\x02a\x01b", "a\x02a\x01b\x02", ""} {
		for _, key := range []string{"a", "junk", "KEYS", "TAGS", "UNIQ_KEY", "k1 k2", ""} {
			want, wok := PropertyValue([]byte(raw), key)
			got, gok := RawPropertyValue(raw, key)
			require.Equal(t, wok, gok, "%q in %q", key, raw)
			require.Equal(t, want, got, "%q in %q", key, raw)
		}
	}
}

func FuzzDecodeProperties(f *testing.F) {
	for _, s := range []string{
		"", "\x02", "a\x01b", "a\x01b\x02", "KEYS\x01k1 k2\x02TAGS\x01t\x02", "a\x01\x02", "a\x01b\x01c", "\x01\x02",
		EncodeProperties(manyProps(20)), EncodeProperties(manyProps(20)) + "key-0003\x01x\x02", "UNIQ_KEY\x01\x02", "a\x01b\x02UNIQ_KEY\x01u",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		props, err := DecodeProperties(s)
		// CheckRawProperties accepts exactly what DecodeProperties does
		// (within the size limit), in stored form, and finds the same
		// UNIQ_KEY.
		raw, hasUniq, rerr := CheckRawProperties(s)
		if len(s)+1 < MaxPropertiesSize {
			require.Equal(t, err == nil, rerr == nil, "%q: decode %v, check %v", s, err, rerr)
		}
		if rerr == nil {
			again, err := DecodeProperties(raw)
			require.NoError(t, err)
			require.Equal(t, props, again)
			require.Equal(t, props[PropertyUniqKey] != "", hasUniq)
			if raw != "" {
				require.Equal(t, byte(PropertySeparator), raw[len(raw)-1])
			}
		} else if len(s)+1 < MaxPropertiesSize {
			require.ErrorIs(t, rerr, ErrBadProperty)
		}
		if err != nil {
			require.ErrorIs(t, err, ErrBadProperty)
			return
		}
		for k, v := range props {
			require.NoError(t, checkProperty(k, v))
			got, ok := PropertyValue([]byte(s), k)
			require.True(t, ok, k)
			require.Equal(t, v, got, k)
		}
		enc := EncodeProperties(props)
		again, err := DecodeProperties(enc)
		require.NoError(t, err)
		require.Equal(t, props, again)
		// Same pairs, possibly reordered, with or without the last separator.
		require.LessOrEqual(t, len(enc)-len(s), 1)
		require.GreaterOrEqual(t, len(enc)-len(s), -1)
	})
}

func TestLenientRawProperties(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		dropped  int
		err      bool
	}{
		{in: "a\x01b\x02", want: "a\x01b\x02"},
		{in: "a\x01b\x02\x01\x02", want: "a\x01b\x02", dropped: 1},             // an empty pair at the end
		{in: "a\x01b\x02\x02c\x01d", want: "a\x01b\x02c\x01d\x02", dropped: 1}, // an empty pair inside
		{in: "noseparator\x02a\x01b", want: "a\x01b\x02", dropped: 1},
		{in: "a\x011\x02a\x012\x02", want: "a\x012\x02", dropped: 1}, // the last value wins
		{in: "a\x01b\x01c\x02", err: true},                           // a value with a separator
	} {
		raw, _, dropped, err := LenientRawProperties(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("%q: accepted as %q", tc.in, raw)
			}
			continue
		}
		if err != nil || raw != tc.want || dropped != tc.dropped {
			t.Errorf("%q: got %q, %d dropped, %v; want %q, %d dropped", tc.in, raw, dropped, err, tc.want, tc.dropped)
		}
	}
}
