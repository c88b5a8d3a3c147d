package message

import (
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

// naiveHashCode is Java's String.hashCode() spelled out over UTF-16 units.
func naiveHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

func TestJavaHashCode(t *testing.T) {
	tests := []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"Aa", 2112},
		{"BB", 2112}, // Java's classic collision
		{"hello", 99162322},
		{"polygenelubricants", -1 << 31}, // overflows to Integer.MIN_VALUE
		{"é", 0xE9},
		{"日本", 0x65E5*31 + 0x672C},
		{"😀", 0xD83D*31 + 0xDE00},          // one rune, a surrogate pair
		{"a😀", (97*31+0xD83D)*31 + 0xDE00}, // ASCII prefix, then the slow path
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, JavaHashCode(tt.s), "%q", tt.s)
		require.Equal(t, tt.want, naiveHashCode(tt.s), "%q", tt.s)
	}
}

func TestTagsCode(t *testing.T) {
	require.Equal(t, int64(0), TagsCode(""))
	require.Equal(t, int64(2112), TagsCode("Aa"))
	require.Equal(t, int64(-1<<31), TagsCode("polygenelubricants"))
}

func FuzzJavaHashCode(f *testing.F) {
	for _, s := range []string{"", "hello", "日本", "a😀b", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		require.Equal(t, naiveHashCode(s), JavaHashCode(s))
	})
}

func TestTagsCodeBytes(t *testing.T) {
	for _, tag := range []string{"", "TagA", "a b", "héllo", "日本", "x\xffy", strings.Repeat("z", 100)} {
		require.Equal(t, TagsCode(tag), TagsCodeBytes([]byte(tag)), "%q", tag)
	}
}
