package statusline

import (
	"math"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzParse checks that Parse never panics and that an accepted payload
// holds only sane numbers and printable strings. Seeds are in
// testdata/fuzz/FuzzParse/.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"context_window":{"context_window_size":200000,"used_percentage":22,"current_usage":{"input_tokens":8,"cache_creation_input_tokens":44287,"cache_read_input_tokens":0}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			if p != nil {
				t.Fatal("a payload and an error")
			}
			return
		}
		for _, s := range []string{p.SessionID, p.TranscriptPath, p.Cwd, p.ProjectDir, p.Model, p.Version} {
			if len(s) > maxText || !utf8.ValidString(s) {
				t.Fatalf("kept %q", s)
			}
			for _, r := range s {
				if unicode.IsControl(r) {
					t.Fatalf("kept a control character in %q", s)
				}
			}
		}
		if p.WindowSize < 0 {
			t.Fatalf("window %d", p.WindowSize)
		}
		u := p.Usage
		if u == nil {
			if p.UsageFrom != "" {
				t.Fatalf("no usage, from %q", p.UsageFrom)
			}
			return
		}
		if u.Tokens < 0 || u.Window != p.WindowSize || math.IsNaN(u.Fraction) || u.Fraction < 0 || u.Fraction > 1 {
			t.Fatalf("usage %+v (window %d)", *u, p.WindowSize)
		}
		switch p.UsageFrom {
		case SourceUsedPercentage:
		case SourceCurrentUsage:
			if u.Tokens == 0 {
				t.Fatalf("zero current_usage accepted: %+v", *u)
			}
			want := 0.0
			if u.Window > 0 {
				want = min(float64(u.Tokens)/float64(u.Window), 1)
			}
			if u.Fraction != want {
				t.Fatalf("fraction %v, want %v", u.Fraction, want)
			}
		default:
			t.Fatalf("usage from %q", p.UsageFrom)
		}
	})
}
