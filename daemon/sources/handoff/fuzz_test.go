package handoff

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse checks that Parse never panics, that it is deterministic, that
// each section is valid UTF-8 with no blank line at either end, that
// without duplicates every section is a verbatim piece of the input, and
// that a file with no warnings round-trips: writing the sections back under
// their headings and parsing again gives the same sections. Seeds are in
// testdata/fuzz/FuzzParse/.
func FuzzParse(f *testing.F) {
	f.Add([]byte("## Goal\ng\n```\n# x\n```\n## Do not:\nd\n"))
	f.Fuzz(func(t *testing.T, md []byte) {
		h, err := Parse(md)
		if err != nil {
			if h != nil {
				t.Fatal("a handoff and an error")
			}
			return
		}
		again, _ := Parse(md)
		if !reflect.DeepEqual(h, again) {
			t.Fatal("not deterministic")
		}
		fields := []string{h.Goal, h.Done, h.Next, h.Blockers, h.DoNot, h.Refuted}
		repeated := false
		for _, w := range h.Warnings {
			repeated = repeated || strings.Contains(w, "repeated")
		}
		for _, s := range fields {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8 in %q", s)
			}
			if s == "" {
				continue
			}
			lines := strings.Split(s, "\n")
			if strings.TrimSpace(lines[0]) == "" || strings.TrimSpace(lines[len(lines)-1]) == "" {
				t.Fatalf("blank line at an end of %q", s)
			}
			if !repeated && !strings.Contains(string(md), s) {
				t.Fatalf("%q is not a piece of the input", s)
			}
		}
		if len(h.Warnings) > 0 {
			return
		}
		names := []string{"Goal", "Done", "Next", "Blockers", "Do not", "Refuted"}
		var b strings.Builder
		for i, s := range fields {
			b.WriteString("## " + names[i] + "\n" + s + "\n")
		}
		h2, err := Parse([]byte(b.String()))
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if got := []string{h2.Goal, h2.Done, h2.Next, h2.Blockers, h2.DoNot, h2.Refuted}; !reflect.DeepEqual(got, fields) || len(h2.Warnings) > 0 {
			t.Fatalf("round trip:\n got %q %q\nwant %q", got, h2.Warnings, fields)
		}
	})
}
