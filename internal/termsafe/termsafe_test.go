package termsafe

import (
	"testing"
	"unicode/utf8"
)

func TestName(t *testing.T) {
	cases := []struct{ in, want string }{
		{"src/main.go", "src/main.go"},
		{"ünïcode/名前.txt", "ünïcode/名前.txt"},
		{"esc\033[31m.txt", `"esc\033[31m.txt"`},
		{"a\033]0;pwned\007.txt", `"a\033]0;pwned\a.txt"`},
		{"clear\033[2J", `"clear\033[2J"`},
		{"line\nbreak\ttab\r", `"line\nbreak\ttab\r"`},
		{`quo"te\back`, `"quo\"te\\back"`},
		{"del\x7f", `"del\177"`},
		{"nul\x00", `"nul\000"`},
		{"c1\u009b31m", `"c1\u009b31m"`},
		{"rlo\u202etxt.exe", `"rlo\u202etxt.exe"`},
		{"iso\u2066x\u2069", `"iso\u2066x\u2069"`},
		{"zw\u200bsp\u200d\u2060\ufeff", `"zw\u200bsp\u200d\u2060\ufeff"`},
		{"bad\xffutf8", `"bad\377utf8"`},
	}
	for _, c := range cases {
		if got := Name(c.in); got != c.want {
			t.Errorf("Name(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"# Goal\nship it\n\t- step\n", "# Goal\nship it\n\t- step\n"},
		{`a "quoted" C:\path`, `a "quoted" C:\path`},
		{"red\033[31m\033[2J\r\n", `red\033[31m\033[2J\r` + "\n"},
		{"title\033]0;pwned\007", `title\033]0;pwned\a`},
		{"c1\u0085 bidi\u202e zw\u200b bom\ufeff", `c1\u0085 bidi\u202e zw\u200b bom\ufeff`},
		{"bad\xc3", `bad\303`},
	}
	for _, c := range cases {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNoRawControlsOut checks, over every byte and a range of runes, that
// neither function lets a control or invisible character through (Text
// keeps only newline and tab) and that the output is valid UTF-8.
func TestNoRawControlsOut(t *testing.T) {
	var in []byte
	for b := 0; b < 256; b++ {
		in = append(in, byte(b), 'x')
	}
	for r := rune(0x80); r < 0x3000; r++ {
		in = utf8.AppendRune(in, r)
	}
	in = utf8.AppendRune(in, 0xfeff)
	for name, f := range map[string]func(string) string{"Name": Name, "Line": Line, "Text": Text} {
		out := f(string(in))
		if !utf8.ValidString(out) {
			t.Errorf("%s: output is not valid UTF-8", name)
		}
		for _, r := range out {
			if (name == "Text" && (r == '\n' || r == '\t')) || !unsafeRune(r, utf8.RuneLen(r)) {
				continue
			}
			t.Errorf("%s: %U reached the output", name, r)
		}
	}
}

// TestTextOfNameIsName: a quoted name passes through Text unchanged, so a
// name inside a text escaped as a whole is not escaped twice.
func TestTextOfNameIsName(t *testing.T) {
	for _, s := range []string{"esc\033[31m.txt", `q"\`, "\u202e", "plain"} {
		if q := Name(s); Text(q) != q {
			t.Errorf("Text(Name(%q)) = %q, want %q", s, Text(q), q)
		}
	}
}

func TestLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{`HTTP 400: {"error":"x"}`, `HTTP 400: {"error":"x"}`},
		{"two\nlines\tand\033[2J", `two\nlines\tand\033[2J`},
	}
	for _, c := range cases {
		if got := Line(c.in); got != c.want {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
