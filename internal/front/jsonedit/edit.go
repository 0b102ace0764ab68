package jsonedit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Obj is an object to insert, its members in the order they are written.
type Obj []KV

// KV is one member of an Obj.
type KV struct {
	K string
	V any // string, int, bool, []any or Obj
}

// Get returns the value of member k, or nil.
func (o Obj) Get(k string) any {
	for _, kv := range o {
		if kv.K == k {
			return kv.V
		}
	}
	return nil
}

// style is how the text around a container is written, so that what is
// inserted looks like what is already there.
type style struct {
	pretty      bool   // members on lines of their own
	indent      string // a member's indentation
	closeIndent string // the closing bracket's, on its own line
	unit        string // one level of indentation
	nl          string // "\n" or "\r\n"
	colon       string // ":" or ": "
	comma       string // "," or ", " between members on one line
}

// lineIndent returns the whitespace that starts the line holding offset off.
func lineIndent(src []byte, off int) string {
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	end := start
	for end < len(src) && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end])
}

// indentUnit returns the file's indentation step: the leading whitespace of
// its first indented line, or two spaces.
func indentUnit(src []byte) string {
	for _, line := range bytes.Split(src, []byte("\n")) {
		n := 0
		for n < len(line) && (line[n] == ' ' || line[n] == '\t') {
			n++
		}
		if n > 0 && n < len(line) && line[n] != '\r' {
			return string(line[:n])
		}
	}
	return "  "
}

// styleOf reads how container c (an object or an array) is written.
func styleOf(src []byte, c *Value) style {
	s := style{nl: "\n", colon: ": ", comma: ", "}
	if bytes.Contains(src, []byte("\r\n")) {
		s.nl = "\r\n"
	}
	first := -1 // where the first member or element starts
	switch {
	case c.Kind == Object && len(c.Members) > 0:
		first = c.Members[0].KeyStart
		m := c.Members[0]
		if !bytes.ContainsAny(src[m.KeyEnd:m.Value.Start], " \t") {
			s.colon = ":"
		}
	case c.Kind == Array && len(c.Elems) > 0:
		first = c.Elems[0].Start
	}
	if first < 0 {
		// Empty: written like the file around it.
		s.pretty = bytes.IndexByte(src, '\n') >= 0
		s.unit = indentUnit(src)
		s.closeIndent = lineIndent(src, c.Start)
		s.indent = s.closeIndent + s.unit
		if !s.pretty {
			s.colon, s.comma = compactSeparators(src)
		}
		return s
	}
	s.pretty = bytes.IndexByte(src[c.Start:first], '\n') >= 0
	if !s.pretty {
		s.unit = indentUnit(src)
		_, s.comma = compactSeparators(src[c.Start:c.End])
		return s
	}
	s.indent = lineIndent(src, first)
	s.closeIndent = lineIndent(src, c.Start)
	if closing := c.End - 1; bytes.IndexByte(src[lastEnd(c):closing], '\n') >= 0 {
		s.closeIndent = lineIndent(src, closing)
	}
	if unit, ok := strings.CutPrefix(s.indent, s.closeIndent); ok && unit != "" {
		s.unit = unit
	} else {
		s.unit = indentUnit(src)
	}
	return s
}

// compactSeparators reads whether text written on one line puts a space
// after its colons and commas.
func compactSeparators(src []byte) (colon, comma string) {
	colon, comma = ":", ","
	if bytes.Contains(src, []byte(`": `)) {
		colon = ": "
	}
	if bytes.Contains(src, []byte(`, "`)) || bytes.Contains(src, []byte(", {")) || bytes.Contains(src, []byte(", [")) {
		comma = ", "
	}
	return colon, comma
}

// lastEnd returns where the container's last member or element ends.
func lastEnd(c *Value) int {
	switch {
	case c.Kind == Object && len(c.Members) > 0:
		return c.Members[len(c.Members)-1].Value.End
	case c.Kind == Array && len(c.Elems) > 0:
		return c.Elems[len(c.Elems)-1].End
	}
	return c.Start + 1
}

// Render writes v as JSON text in style s, its first line at the caller's
// position and its other lines indented from indent.
func render(v any, s style, indent string) (string, error) {
	var b strings.Builder
	if err := s.write(&b, v, indent); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (s style) write(b *strings.Builder, v any, indent string) error {
	switch v := v.(type) {
	case Obj:
		if len(v) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, kv := range v {
			s.sep(b, i, indent)
			b.WriteString(quote(kv.K))
			b.WriteString(s.colon)
			if err := s.write(b, kv.V, indent+s.unit); err != nil {
				return err
			}
		}
		s.end(b, indent)
		b.WriteByte('}')
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range v {
			s.sep(b, i, indent)
			if err := s.write(b, e, indent+s.unit); err != nil {
				return err
			}
		}
		s.end(b, indent)
		b.WriteByte(']')
	case string:
		b.WriteString(quote(v))
	case int:
		fmt.Fprintf(b, "%d", v)
	case bool:
		fmt.Fprintf(b, "%t", v)
	default:
		return fmt.Errorf("jsonedit: cannot write a %T", v)
	}
	return nil
}

// sep starts member or element i of a container at indent.
func (s style) sep(b *strings.Builder, i int, indent string) {
	if i > 0 {
		if s.pretty {
			b.WriteByte(',')
		} else {
			b.WriteString(s.comma)
		}
	}
	if s.pretty {
		b.WriteString(s.nl)
		b.WriteString(indent + s.unit)
	}
}

func (s style) end(b *strings.Builder, indent string) {
	if s.pretty {
		b.WriteString(s.nl)
		b.WriteString(indent)
	}
}

// quote writes s as a JSON string the way a person would: <, > and & as
// they are, not as \u003c.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// splice returns src with src[start:end] replaced by repl.
func splice(src []byte, start, end int, repl string) []byte {
	out := make([]byte, 0, len(src)-(end-start)+len(repl))
	out = append(out, src[:start]...)
	out = append(out, repl...)
	return append(out, src[end:]...)
}

// AppendMember adds the member key: val at the end of object obj of src.
func AppendMember(src []byte, obj *Value, key string, val any) ([]byte, error) {
	if obj.Kind != Object {
		return nil, fmt.Errorf("jsonedit: AppendMember on %s", obj.Kind)
	}
	s := styleOf(src, obj)
	body, err := render(val, s, s.indent)
	if err != nil {
		return nil, err
	}
	member := quote(key) + s.colon + body
	return insert(src, obj, s, member), nil
}

// AppendElem adds val at the end of array arr of src.
func AppendElem(src []byte, arr *Value, val any) ([]byte, error) {
	if arr.Kind != Array {
		return nil, fmt.Errorf("jsonedit: AppendElem on %s", arr.Kind)
	}
	s := styleOf(src, arr)
	body, err := render(val, s, s.indent)
	if err != nil {
		return nil, err
	}
	return insert(src, arr, s, body), nil
}

// insert puts text (a member or an element) after the container's last
// one, or into the empty container.
func insert(src []byte, c *Value, s style, text string) []byte {
	if len(c.Members) == 0 && len(c.Elems) == 0 {
		if s.pretty {
			text = s.nl + s.indent + text + s.nl + s.closeIndent
		}
		return splice(src, c.Start+1, c.End-1, text)
	}
	at := lastEnd(c)
	if s.pretty {
		return splice(src, at, at, ","+s.nl+s.indent+text)
	}
	return splice(src, at, at, s.comma+text)
}

// RemoveMember takes member i out of object obj of src, with the comma and
// the space that separate it, as AppendMember put them in.
func RemoveMember(src []byte, obj *Value, i int) []byte {
	n := len(obj.Members)
	switch {
	case n == 1:
		return splice(src, obj.Start+1, obj.End-1, "")
	case i == n-1:
		return splice(src, obj.Members[i-1].Value.End, obj.Members[i].Value.End, "")
	default:
		return splice(src, obj.Members[i].KeyStart, obj.Members[i+1].KeyStart, "")
	}
}

// RemoveElem takes element i out of array arr of src, as RemoveMember does
// a member.
func RemoveElem(src []byte, arr *Value, i int) []byte {
	n := len(arr.Elems)
	switch {
	case n == 1:
		return splice(src, arr.Start+1, arr.End-1, "")
	case i == n-1:
		return splice(src, arr.Elems[i-1].End, arr.Elems[i].End, "")
	default:
		return splice(src, arr.Elems[i].Start, arr.Elems[i+1].Start, "")
	}
}

// ReplaceString writes s in place of value v of src.
func ReplaceString(src []byte, v *Value, s string) []byte {
	return splice(src, v.Start, v.End, quote(s))
}

// IsEmptyObject reports whether src holds an object with no members and
// nothing else but whitespace.
func IsEmptyObject(src []byte) bool {
	v, err := Parse(src)
	return err == nil && v.Kind == Object && len(v.Members) == 0
}
