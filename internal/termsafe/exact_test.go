package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Every name comes back exact through Exact and ParseExact, and its exact
// form is valid UTF-8 (JSON carries it as it is).
func TestExactRoundTrips(t *testing.T) {
	names := []string{
		"src/main.go", "ünïcode/名前.txt", "line\nbreak", "tab\there", `back\slash`, `a\x41`,
		`\\`, `"quoted"`, `"`, `say "hi"`, "bad\xffutf8", "\xc3", "esc\033[31m", "rlo\u202etxt", "-leading",
		"$(touch marker)", "back`tick`", "it's", "nul\x00", "c1\u0085", `"\377"`,
	}
	for b := range 256 {
		names = append(names, string([]byte{'x', byte(b), 'y'}))
	}
	for _, n := range names {
		e := Exact(n)
		if !utf8.ValidString(e) {
			t.Errorf("Exact(%q) = %q is not valid UTF-8", n, e)
		}
		back, err := ParseExact(e)
		if err != nil || back != n {
			t.Errorf("ParseExact(Exact(%q) = %q) = %q, %v", n, e, back, err)
		}
		// What Name prints is read back the same way: a person can paste
		// the name a command printed as its argument.
		if back, err := ParseExact(Name(n)); err != nil || back != n {
			t.Errorf("ParseExact(Name(%q) = %s) = %q, %v", n, Name(n), back, err)
		}
	}
}

// A name in its exact form stays as it is unless it must not: plain names,
// backslashes and control characters in valid UTF-8 are not quoted.
func TestExactLeavesPlainNames(t *testing.T) {
	for in, want := range map[string]string{
		"src/a.go":   "src/a.go",
		`dir\file`:   `dir\file`,
		"a\nb":       "a\nb",
		"bad\xff":    `"bad\377"`,
		`"x"`:        `"\"x\""`,
		"\xff\"\\\n": `"\377\"\\\n"`,
	} {
		if got := Exact(in); got != want {
			t.Errorf("Exact(%q) = %q, want %q", in, got, want)
		}
	}
	// \x escapes are read too.
	if got, err := ParseExact(`"\xff.txt"`); err != nil || got != "\xff.txt" {
		t.Errorf(`ParseExact("\xff.txt") = %q, %v`, got, err)
	}
}

// A text that begins with a double quote but is no quoted name is refused,
// and the error shows it escaped.
func TestParseExactRefusesMalformed(t *testing.T) {
	for _, s := range []string{`"`, `"open`, `"bad \q escape"`, `"a" b`, "\"raw\nline\"", "\"\x1b[2J"} {
		_, err := ParseExact(s)
		if err == nil {
			t.Errorf("ParseExact(%q): no error", s)
			continue
		}
		if strings.ContainsAny(err.Error(), "\x1b\n") {
			t.Errorf("ParseExact(%q): the error carries a raw control character: %q", s, err)
		}
	}
}

func TestShowExact(t *testing.T) {
	for in, want := range map[string]string{
		"src/a.go":        "src/a.go",
		`"\377.txt"`:      `"\377.txt"`,
		"a\nb":            `"a\nb"`,
		`"unterminated`:   `"\"unterminated"`,
		`"\u202eexe.txt"`: `"\u202eexe.txt"`,
	} {
		if got := ShowExact(in); got != want {
			t.Errorf("ShowExact(%q) = %s, want %s", in, got, want)
		}
	}
}
