package tomledit

import (
	"errors"
	"strings"
	"testing"
)

const doc = `# a comment
model = "x" # trailing
policy = """
[not.a.header]
"""

[features]
web = true

# about hooks
[[hooks.Stop]]
[[hooks.Stop.hooks]]
command = "say done"
`

// Parse finds each expression's lines, and a header inside a multi-line
// string is no header.
func TestParse(t *testing.T) {
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		kind        Kind
		key         string
		first, last int
		comment     string
	}
	var got []want
	for _, e := range d.Exprs {
		got = append(got, want{e.Kind, strings.Join(e.Key, "."), e.First, e.Last, e.Comment})
	}
	exp := []want{
		{Comment, "", 0, 0, "# a comment"},
		{KeyValue, "model", 1, 1, "# trailing"},
		{KeyValue, "policy", 2, 4, ""},
		{Table, "features", 6, 6, ""},
		{KeyValue, "web", 7, 7, ""},
		{Comment, "", 9, 9, "# about hooks"},
		{ArrayTable, "hooks.Stop", 10, 10, ""},
		{ArrayTable, "hooks.Stop.hooks", 11, 11, ""},
		{KeyValue, "command", 12, 12, ""},
	}
	if len(got) != len(exp) {
		t.Fatalf("exprs %+v", got)
	}
	for i := range exp {
		if got[i] != exp[i] {
			t.Errorf("expr %d = %+v, want %+v", i, got[i], exp[i])
		}
	}
	secs := d.Sections()
	if len(secs) != 4 || secs[1].First != 6 || secs[1].Last != 7 || secs[2].Last != 10 || !KeyIs(d.Key(secs[3]), "hooks", "Stop", "hooks") {
		t.Fatalf("sections %+v", secs)
	}
	if !Under(d.Key(secs[3]), "hooks", "Stop") || Under(d.Key(secs[2]), "hooks", "Stop") {
		t.Fatal("Under")
	}
	if f := d.Data["features"].(map[string]any); f["web"] != true {
		t.Fatalf("data %+v", d.Data)
	}
}

// A document that is not TOML is refused with its line and column, among
// them a table declared twice.
func TestParseError(t *testing.T) {
	for _, tc := range []struct {
		src       string
		line, col int
	}{
		{"a = 1\n[features]\nx = 1\n[features]\ny = 2\n", 4, 2},
		{"a = \n", 1, 5},
		{"[x\n", 1, 3},
	} {
		_, err := Parse([]byte(tc.src))
		var e *Error
		if !errors.As(err, &e) || e.Line != tc.line || e.Col != tc.col {
			t.Errorf("Parse(%q) = %v, want line %d column %d", tc.src, err, tc.line, tc.col)
		}
	}
}

// What Append adds, Remove takes out to the byte, CRLF and a document
// Codex wrote after the block included.
func TestAppendRemove(t *testing.T) {
	block := "# ours\n[x]\na = 1\n\n[y]\nb = 2\n"
	for _, src := range []string{"", "a = 1\n", "[t]\nk = \"v\"\n\n", "a = 1\r\n"} {
		d, err := Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		b := block
		if d.Newline() == "\r\n" {
			b = strings.ReplaceAll(block, "\n", "\r\n")
		}
		out := d.Append(b)
		d2, err := Parse(out)
		if err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		if back := d2.Remove(ours(d2)); string(back) != src {
			t.Errorf("Remove(Append(%q)) = %q", src, back)
		}
		// Codex adds a table after the block: the block goes, one blank
		// line stays between the two.
		d3, _ := Parse(append(out, "\n[hooks.state.\"k\"]\ntrusted_hash = \"h\"\n"...))
		if back := string(d3.Remove(ours(d3))); src == "a = 1\n" && back != "a = 1\n\n[hooks.state.\"k\"]\ntrusted_hash = \"h\"\n" {
			t.Errorf("with a table after: %q", back)
		}
	}
	d, _ := Parse([]byte("a = 1\n[t]\nb = 2\n"))
	if got := string(d.Insert(2, "c = 3\n")); got != "a = 1\n[t]\nc = 3\nb = 2\n" {
		t.Fatalf("Insert: %q", got)
	}
	if got := string(d.Insert(3, "c = 3\n")); got != "a = 1\n[t]\nb = 2\nc = 3\n" {
		t.Fatalf("Insert at the end: %q", got)
	}
	d, _ = Parse([]byte("[t]\nb = 2"))
	if got := string(d.Insert(2, "c = 3\n")); got != "[t]\nb = 2\nc = 3\n" {
		t.Fatalf("Insert after a last line with no newline: %q", got)
	}
}

// ours marks the lines of sections [x] and [y] and the "# ours" comment.
func ours(d *Doc) []bool {
	del := make([]bool, len(d.Lines))
	for _, e := range d.Exprs {
		if e.Kind == Comment && e.Comment == "# ours" {
			del[e.First] = true
		}
	}
	for _, s := range d.Sections() {
		if k := d.Key(s); KeyIs(k, "x") || KeyIs(k, "y") {
			for i := s.First; i <= s.Last; i++ {
				del[i] = true
			}
		}
	}
	return del
}

func TestQuote(t *testing.T) {
	s := "a \"b\" \\ c\td\n\x01é"
	d, err := Parse([]byte("k = " + Quote(s) + "\n"))
	if err != nil || d.Data["k"] != s {
		t.Fatalf("%v %q", err, d.Data["k"])
	}
}
