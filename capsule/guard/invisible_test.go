package guard

import (
	"fmt"
	"strings"
	"testing"
)

// invisibleClasses are the invisible formatting characters the guards
// refuse in explicit writes and strip from automatic content, by class:
// they can make a focus or a file name read differently from what it is.
var invisibleClasses = []struct {
	name  string
	runes []rune
}{
	{"bidi embedding and override (U+202A..U+202E)", []rune{0x202A, 0x202B, 0x202C, 0x202D, 0x202E}},
	{"bidi isolate (U+2066..U+2069)", []rune{0x2066, 0x2067, 0x2068, 0x2069}},
	{"zero width space, non-joiner, joiner (U+200B..U+200D)", []rune{0x200B, 0x200C, 0x200D}},
	{"word joiner (U+2060)", []rune{0x2060}},
	{"zero width no-break space, BOM (U+FEFF)", []rune{0xFEFF}},
}

// TestInvisibleFormattingRefusedEverywhere: each class of invisible
// formatting character is refused in every free-text field of an explicit
// write, raw or as a JSON escape, with the field's own code, naming the
// field and the character as U+XXXX (never the text around it).
func TestInvisibleFormattingRefusedEverywhere(t *testing.T) {
	g := testGuard(t)
	for _, class := range invisibleClasses {
		t.Run(class.name, func(t *testing.T) {
			for _, p := range placements() {
				for _, r := range class.runes {
					for _, form := range []struct{ name, body string }{
						{"raw", p.body("ab" + string(r) + "cd")},
						{"escaped", strings.Replace(p.body("abXYZcd"), "XYZ", fmt.Sprintf(`\u%04x`, r), 1)},
					} {
						err := p.decode(g, form.body)
						if err == nil {
							t.Errorf("%s: U+%04X (%s) accepted", p.field, r, form.name)
							continue
						}
						e := asError(t, err)
						want := fmt.Sprintf("U+%04X", r)
						if e.Code != p.code || e.Field != p.field || !strings.Contains(e.Message, want) || strings.Contains(e.Message, "abc") {
							t.Errorf("%s: U+%04X (%s): got %v; want %s at %s naming %s", p.field, r, form.name, e, p.code, p.field, want)
						}
					}
				}
			}
		})
	}
}

// TestInvisibleFormattingStrippedFromAutomaticContent: Redact, which every
// piece of automatic content (commit subjects, file names, plan steps)
// passes, removes each class; and a credential split by one is still
// found once it is gone.
func TestInvisibleFormattingStrippedFromAutomaticContent(t *testing.T) {
	g := testGuard(t)
	for _, class := range invisibleClasses {
		for _, r := range class.runes {
			in := "fix " + string(r) + "the parser" + string(r)
			if got := g.Redact(in); got != "fix the parser" {
				t.Errorf("%s: Redact(%q) = %q", class.name, in, got)
			}
			split := "key AKIA" + string(r) + "IOSFODNN7EXAMPLQ here"
			if got := g.Redact(split); strings.Contains(got, "IOSFODNN7") {
				t.Errorf("%s: a key split by U+%04X survived: %q", class.name, r, got)
			}
		}
	}
}

// TestVisibleNeighboursAllowed: characters next to the invisible ones in
// Unicode (en space, hyphen, en dash, LRM-free text, ⁡ is not listed) are
// not mistaken for them.
func TestVisibleNeighboursAllowed(t *testing.T) {
	for _, s := range []string{"a\u2002b", "a\u2010b", "a\u2013b", "a\u2026b", "a\u2070b", "a\ufefe", "\ufffd", "日本語"} {
		if r := firstInvisible(s); r >= 0 {
			t.Errorf("firstInvisible(%q) = %U", s, r)
		}
	}
}
