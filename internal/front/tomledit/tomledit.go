// Package tomledit reads a TOML document as the lines a person wrote, so
// that a few lines can be added or taken out and everything else (comments,
// blank lines, the order of tables, the way values are spelled) stays
// byte for byte. Decoding a file and encoding it again would rewrite all
// of that, and a user's config is not ours to reformat.
//
// go-toml/v2 does the reading: its decoder checks the whole document (and
// names the line and column of what is wrong), its parser says which line
// each table header, key and comment is on.
package tomledit

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Kind is what one top-level expression of a document is.
type Kind int

// The kinds of top-level expressions.
const (
	Table      Kind = iota + 1 // [a.b]
	ArrayTable                 // [[a.b]]
	KeyValue                   // a.b = v
	Comment                    // a comment on a line of its own
)

// Expr is one top-level expression and the lines it spans.
type Expr struct {
	Kind        Kind
	Key         []string // a header's or a key/value's key, its parts decoded
	First, Last int      // line indexes
	Comment     string   // a header's or a key/value's trailing comment, or a Comment's text
}

// Line is one line of the document: Src[Start:End], its line ending
// included.
type Line struct{ Start, End int }

// Doc is a parsed document.
type Doc struct {
	Src   []byte
	Lines []Line
	Exprs []Expr
	// Data is the document decoded: tables as map[string]any, arrays of
	// tables as []any of map[string]any.
	Data map[string]any
}

// Error is a document that is not TOML, with where it goes wrong.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// Parse reads src.
func Parse(src []byte) (*Doc, error) {
	d := &Doc{Src: src, Data: map[string]any{}}
	if err := toml.Unmarshal(src, &d.Data); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return nil, &Error{Line: line, Col: col, Msg: strings.TrimPrefix(de.Error(), "toml: ")}
		}
		return nil, err
	}
	for start := 0; start < len(src); {
		end := bytes.IndexByte(src[start:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += start + 1
		}
		d.Lines = append(d.Lines, Line{start, end})
		start = end
	}
	p := unstable.Parser{KeepComments: true}
	p.Reset(src)
	for p.NextExpression() {
		n := p.Expression()
		var e Expr
		switch n.Kind {
		case unstable.Comment:
			e.Kind, e.Comment = Comment, string(n.Data)
			e.First = d.lineOf(int(n.Raw.Offset))
			e.Last = e.First
			d.Exprs = append(d.Exprs, e)
			continue
		case unstable.Table, unstable.ArrayTable:
			e.Kind = Table
			if n.Kind == unstable.ArrayTable {
				e.Kind = ArrayTable
			}
			e.First = -1
		case unstable.KeyValue:
			e.Kind = KeyValue
			e.First = d.lineOf(int(n.Raw.Offset))
			e.Last = d.lineOf(int(n.Raw.Offset+n.Raw.Length) - 1)
		default:
			continue
		}
		for it := n.Key(); it.Next(); {
			k := it.Node()
			e.Key = append(e.Key, string(k.Data))
			if e.First < 0 {
				e.First = d.lineOf(int(k.Raw.Offset))
				e.Last = e.First
			}
		}
		if c := n.Next(); c != nil && c.Kind == unstable.Comment {
			e.Comment = string(c.Data)
		}
		d.Exprs = append(d.Exprs, e)
	}
	if err := p.Error(); err != nil {
		return nil, err // the decoder above has read the same text: not reached
	}
	return d, nil
}

// lineOf returns the index of the line holding byte offset off.
func (d *Doc) lineOf(off int) int {
	return sort.Search(len(d.Lines), func(i int) bool { return d.Lines[i].End > off })
}

// Text returns line i without its line ending.
func (d *Doc) Text(i int) string {
	return strings.TrimRight(string(d.Src[d.Lines[i].Start:d.Lines[i].End]), "\r\n")
}

// Blank reports whether line i holds only whitespace.
func (d *Doc) Blank(i int) bool {
	return strings.TrimSpace(d.Text(i)) == ""
}

// Newline returns the document's line ending: "\r\n" when it uses that.
func (d *Doc) Newline() string {
	if bytes.Contains(d.Src, []byte("\r\n")) {
		return "\r\n"
	}
	return "\n"
}

// Section is a table header and the expressions under it, up to the next
// header; the root section has no header.
type Section struct {
	Header int   // index into Exprs, -1 for the root
	Body   []int // indexes into Exprs
	// First and Last are the lines from the header to the last line of
	// its last key/value (the header's own line when it has none):
	// comments and blank lines after that belong to what follows.
	First, Last int
}

// Sections returns the document's sections in order.
func (d *Doc) Sections() []Section {
	s := []Section{{Header: -1, First: 0, Last: -1}}
	for i, e := range d.Exprs {
		cur := &s[len(s)-1]
		switch e.Kind {
		case Table, ArrayTable:
			s = append(s, Section{Header: i, First: e.First, Last: e.Last})
		case KeyValue:
			cur.Body = append(cur.Body, i)
			cur.Last = e.Last
		default:
			cur.Body = append(cur.Body, i)
		}
	}
	return s
}

// Key returns the key of section s's header (nil for the root).
func (d *Doc) Key(s Section) []string {
	if s.Header < 0 {
		return nil
	}
	return d.Exprs[s.Header].Key
}

// KeyIs reports whether key k is exactly parts.
func KeyIs(k []string, parts ...string) bool {
	if len(k) != len(parts) {
		return false
	}
	for i := range k {
		if k[i] != parts[i] {
			return false
		}
	}
	return true
}

// Under reports whether key k lies strictly under prefix.
func Under(k []string, prefix ...string) bool {
	return len(k) > len(prefix) && KeyIs(k[:len(prefix)], prefix...)
}

// Insert returns the document with text inserted before line i (at the
// end when i is the number of lines); text must end in a line ending.
func (d *Doc) Insert(i int, text string) []byte {
	at := len(d.Src)
	if i < len(d.Lines) {
		at = d.Lines[i].Start
	} else if at > 0 && d.Src[at-1] != '\n' {
		text = d.Newline() + text
	}
	out := make([]byte, 0, len(d.Src)+len(text))
	out = append(out, d.Src[:at]...)
	out = append(out, text...)
	return append(out, d.Src[at:]...)
}

// Remove returns the document without the lines del marks, tidying the
// blank lines around them the way Append wrote them: blank lines between
// two removed lines go too, and so does one blank line before a run of
// removed lines when the run ends the document or a blank line follows
// it. Taking out exactly what Append added gives back the original bytes.
func (d *Doc) Remove(del []bool) []byte {
	n := len(d.Lines)
	gone := make([]bool, n)
	copy(gone, del)
	removed := func(i int) bool { return i < n && del[i] }
	for i := 0; i < n; i++ {
		if !del[i] {
			continue
		}
		// A run: i..j of removed and blank lines, ending on a removed one.
		j, last := i, i
		for j < n && (del[j] || d.Blank(j)) {
			if del[j] {
				last = j
			}
			j++
		}
		for k := i; k <= last; k++ {
			gone[k] = true
		}
		if i > 0 && d.Blank(i-1) && !removed(i-1) && (last+1 == n || d.Blank(last+1)) {
			gone[i-1] = true
		}
		i = last
	}
	var out []byte
	for i, l := range d.Lines {
		if !gone[i] {
			out = append(out, d.Src[l.Start:l.End]...)
		}
	}
	return out
}

// Append returns the document with block (lines, each ending in a line
// ending) added at its end, after a blank line when the document has
// anything in it.
func (d *Doc) Append(block string) []byte {
	nl := d.Newline()
	out := append([]byte(nil), d.Src...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, nl...)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		out = append(out, nl...)
	}
	return append(out, block...)
}

// Quote writes s as a TOML basic string.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
