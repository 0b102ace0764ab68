package guard

import (
	"fmt"
	"strings"
	"testing"
)

// TestControlCharactersRefusedEverywhere: C0 (but tab, newline and
// carriage return), DEL and C1 are refused in every free-text field, with
// the field's own code, naming the field and the character as U+XXXX.
// C1 includes NEL (U+0085) and CSI (U+009B), the 8-bit escape introducer
// that starts a terminal escape sequence on its own.
func TestControlCharactersRefusedEverywhere(t *testing.T) {
	g := testGuard(t)
	refused := []rune{0x00, 0x01, 0x07, 0x08, 0x0B, 0x0C, 0x1B, 0x1F, 0x7F, 0x80, 0x85, 0x8D, 0x9B, 0x9F}
	for _, p := range placements() {
		for _, r := range refused {
			for _, form := range []struct{ name, body string }{
				{"raw", p.body("ab" + string(r) + "cd")},
				// The same character written as a JSON escape.
				{"escaped", strings.Replace(p.body("abXYZcd"), "XYZ", fmt.Sprintf(`\u%04x`, r), 1)},
			} {
				err := p.decode(g, form.body)
				if err == nil {
					t.Errorf("%s: U+%04X (%s) accepted", p.field, r, form.name)
					continue
				}
				e := asError(t, err)
				want := fmt.Sprintf("U+%04X", r)
				if e.Code != p.code || e.Field != p.field || !strings.Contains(e.Message, want) {
					t.Errorf("%s: U+%04X (%s): got %v; want %s at %s naming %s", p.field, r, form.name, e, p.code, p.field, want)
				}
			}
		}
	}
}

// TestControlCharactersAllowed: tab, newline and carriage return stay
// allowed where white space is, and printable characters next to C1 in
// UTF-8 (U+00A0..U+00FF, U+2026) are not mistaken for it.
func TestControlCharactersAllowed(t *testing.T) {
	g := testGuard(t)
	for _, p := range placements() {
		vals := []string{"a\u00a0b é ñ ÿ … ©", "Ā ā ‚ „", "a\tb\nc\r\nd"}
		if p.noSpace {
			vals = []string{"éñÿ…©Āā‚„"}
		}
		for _, v := range vals {
			if err := p.decode(g, p.body(v)); err != nil {
				t.Errorf("%s: %q refused: %v", p.field, v, err)
			}
		}
	}
}

func TestFirstControl(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want rune
	}{
		{"", -1}, {"plain", -1}, {"tab\tnl\ncr\r", -1}, {"\u00a0\u00ff\u0100", -1},
		{"a\x00", 0}, {"\x1b[31m", 0x1b}, {"x\x7f", 0x7f}, {"\u0080", 0x80}, {"ok \u0085 next", 0x85},
		{"\u009b31m", 0x9b}, {"\u009f", 0x9f}, {"é\u0090", 0x90},
	} {
		if got := firstControl(tc.s); got != tc.want {
			t.Errorf("firstControl(%q) = %U, want %U", tc.s, got, tc.want)
		}
	}
}
