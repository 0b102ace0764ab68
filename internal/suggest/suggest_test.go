package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"status", "snapshot", "signal", "statusline", "resume"}
	for _, c := range []struct {
		typed, want string
		ok          bool
	}{
		{"stauts", "status", true}, // two letters swapped
		{"snapshto", "snapshot", true},
		{"resme", "resume", true},   // one left out
		{"statuss", "status", true}, // one too many
		{"snap", "snapshot", true},  // the start of one word
		{"s", "", false},            // too short to be anything's start
		{"sta", "", false},          // the start of two words
		{"frobnicate", "", false},   // nothing like it
		{"status", "", false},       // itself is no suggestion
	} {
		got, ok := Closest(c.typed, known)
		if got != c.want || ok != c.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", c.typed, got, ok, c.want, c.ok)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"stauts", "status", 2}} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
