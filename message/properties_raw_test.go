package message

import "testing"

func TestDeleteRawProperty(t *testing.T) {
	raw := "A\x011\x02DELAY\x013\x02B\x012\x02"
	for _, c := range []struct{ name, want string }{
		{"DELAY", "A\x011\x02B\x012\x02"},
		{"A", "DELAY\x013\x02B\x012\x02"},
		{"B", "A\x011\x02DELAY\x013\x02"},
		{"MISSING", raw},
	} {
		if got := DeleteRawProperty(raw, c.name); got != c.want {
			t.Errorf("DeleteRawProperty(%q): %q, want %q", c.name, got, c.want)
		}
	}
	if got := DeleteRawProperty("", "A"); got != "" {
		t.Errorf("empty: %q", got)
	}
}
