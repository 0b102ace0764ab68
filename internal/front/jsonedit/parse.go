// Package jsonedit edits JSON text in place. Parse reads a document into
// values that know where their text starts and ends; the edits splice a
// member or an element in or out, or replace one value, and leave every
// other byte as it was: key order, members nobody here knows, spacing,
// indentation. Tools that decode a settings file into a map and encode it
// again lose exactly those, and a person's or another tool's file is not
// ours to reformat.
//
// An edit removes what the matching insertion added, byte for byte, so
// taking out what was put in gives back the file it was put into.
package jsonedit

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Kind is the JSON type of a value.
type Kind int

// The JSON types.
const (
	Object Kind = iota + 1
	Array
	String
	Number
	Bool
	Null
)

func (k Kind) String() string {
	switch k {
	case Object:
		return "an object"
	case Array:
		return "an array"
	case String:
		return "a string"
	case Number:
		return "a number"
	case Bool:
		return "true or false"
	case Null:
		return "null"
	}
	return "nothing"
}

// Value is one value of a document and where its text is.
type Value struct {
	Kind       Kind
	Start, End int // the value's text is src[Start:End]

	Members []Member // an object's, in the order of the text
	Elems   []*Value // an array's
	Str     string   // a string's, decoded
}

// Member is one member of an object.
type Member struct {
	Key              string
	KeyStart, KeyEnd int // the key's quoted text is src[KeyStart:KeyEnd]
	Value            *Value
}

// Get returns the value of the object's member key, the last one when the
// key appears twice (as JSON.parse and encoding/json read it), or nil.
func (v *Value) Get(key string) *Value {
	if i := v.Index(key); i >= 0 {
		return v.Members[i].Value
	}
	return nil
}

// Index returns the index of the object's last member key, or -1.
func (v *Value) Index(key string) int {
	if v == nil || v.Kind != Object {
		return -1
	}
	for i := len(v.Members) - 1; i >= 0; i-- {
		if v.Members[i].Key == key {
			return i
		}
	}
	return -1
}

// SyntaxError is text that is not JSON, with where it stops being JSON.
type SyntaxError struct {
	Line, Col int // 1-based; Col counts characters, not bytes
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// maxDepth bounds nesting: a file is read by a recursive parser, and no
// settings file nests this deep.
const maxDepth = 512

// Parse reads src, which must hold exactly one JSON value (RFC 8259;
// no comments, no trailing commas, no byte order mark).
func Parse(src []byte) (*Value, error) {
	p := &parser{src: src}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(src) {
		return nil, p.errorf("unexpected %s after the document", p.what())
	}
	return v, nil
}

type parser struct {
	src []byte
	i   int
}

// Position returns the 1-based line and column of byte offset off in src.
func Position(src []byte, off int) (line, col int) {
	line, col = 1, 1
	for i := 0; i < off && i < len(src); {
		r, n := utf8.DecodeRune(src[i:])
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += n
	}
	return line, col
}

func (p *parser) errorf(format string, args ...any) error {
	line, col := Position(p.src, p.i)
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// what names the byte at the parser's position for an error.
func (p *parser) what() string {
	if p.i >= len(p.src) {
		return "end of file"
	}
	c := p.src[p.i]
	if c < 0x20 || c >= 0x7f {
		if r, _ := utf8.DecodeRune(p.src[p.i:]); r == 0xfeff {
			return "byte order mark"
		}
		return fmt.Sprintf("byte 0x%02x", c)
	}
	return fmt.Sprintf("%q", string(c))
}

func (p *parser) space() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (*Value, error) {
	if depth > maxDepth {
		return nil, p.errorf("nested more than %d deep", maxDepth)
	}
	if p.i >= len(p.src) {
		return nil, p.errorf("unexpected end of file, want a value")
	}
	switch c := p.src[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		start := p.i
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &Value{Kind: String, Start: start, End: p.i, Str: s}, nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return p.literal("true", Bool)
	case c == 'f':
		return p.literal("false", Bool)
	case c == 'n':
		return p.literal("null", Null)
	default:
		return nil, p.errorf("unexpected %s, want a value", p.what())
	}
}

func (p *parser) object(depth int) (*Value, error) {
	v := &Value{Kind: Object, Start: p.i}
	p.i++
	p.space()
	if p.i < len(p.src) && p.src[p.i] == '}' {
		p.i++
		v.End = p.i
		return v, nil
	}
	for {
		p.space()
		if p.i >= len(p.src) || p.src[p.i] != '"' {
			return nil, p.errorf("unexpected %s, want a member's name in double quotes", p.what())
		}
		m := Member{KeyStart: p.i}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		m.Key, m.KeyEnd = key, p.i
		p.space()
		if p.i >= len(p.src) || p.src[p.i] != ':' {
			return nil, p.errorf("unexpected %s, want ':' after a member's name", p.what())
		}
		p.i++
		p.space()
		if m.Value, err = p.value(depth + 1); err != nil {
			return nil, err
		}
		v.Members = append(v.Members, m)
		p.space()
		if p.i >= len(p.src) {
			return nil, p.errorf("unexpected end of file, want ',' or '}'")
		}
		switch p.src[p.i] {
		case ',':
			comma := p.i
			p.i++
			p.space()
			if p.i < len(p.src) && p.src[p.i] == '}' {
				p.i = comma
				return nil, p.errorf("a comma before '}' (JSON allows no trailing comma)")
			}
		case '}':
			p.i++
			v.End = p.i
			return v, nil
		default:
			return nil, p.errorf("unexpected %s, want ',' or '}'", p.what())
		}
	}
}

func (p *parser) array(depth int) (*Value, error) {
	v := &Value{Kind: Array, Start: p.i}
	p.i++
	p.space()
	if p.i < len(p.src) && p.src[p.i] == ']' {
		p.i++
		v.End = p.i
		return v, nil
	}
	for {
		p.space()
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.Elems = append(v.Elems, e)
		p.space()
		if p.i >= len(p.src) {
			return nil, p.errorf("unexpected end of file, want ',' or ']'")
		}
		switch p.src[p.i] {
		case ',':
			comma := p.i
			p.i++
			p.space()
			if p.i < len(p.src) && p.src[p.i] == ']' {
				p.i = comma
				return nil, p.errorf("a comma before ']' (JSON allows no trailing comma)")
			}
		case ']':
			p.i++
			v.End = p.i
			return v, nil
		default:
			return nil, p.errorf("unexpected %s, want ',' or ']'", p.what())
		}
	}
}

// str reads a string literal and decodes it with encoding/json, which
// knows every escape and refuses what JSON refuses.
func (p *parser) str() (string, error) {
	start := p.i
	p.i++ // the opening quote
	for p.i < len(p.src) {
		switch c := p.src[p.i]; {
		case c == '\\':
			p.i += 2
		case c == '"':
			p.i++
			var s string
			if err := json.Unmarshal(p.src[start:p.i], &s); err != nil {
				p.i = start
				return "", p.errorf("a string that is not valid JSON: %v", err)
			}
			return s, nil
		case c < 0x20:
			return "", p.errorf("a control character (byte 0x%02x) inside a string", c)
		default:
			p.i++
		}
	}
	p.i = start
	return "", p.errorf("a string that is never closed")
}

func (p *parser) number() (*Value, error) {
	start := p.i
	if p.src[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if n := digits(); n == 0 {
		return nil, p.errorf("unexpected %s in a number", p.what())
	} else if n > 1 && p.src[intStart] == '0' {
		p.i = intStart
		return nil, p.errorf("a number with a leading zero")
	}
	if p.i < len(p.src) && p.src[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errorf("unexpected %s after a decimal point", p.what())
		}
	}
	if p.i < len(p.src) && (p.src[p.i] == 'e' || p.src[p.i] == 'E') {
		p.i++
		if p.i < len(p.src) && (p.src[p.i] == '+' || p.src[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errorf("unexpected %s in an exponent", p.what())
		}
	}
	return &Value{Kind: Number, Start: start, End: p.i}, nil
}

func (p *parser) literal(word string, k Kind) (*Value, error) {
	start := p.i
	if len(p.src)-p.i < len(word) || string(p.src[p.i:p.i+len(word)]) != word {
		return nil, p.errorf("unexpected %s, want a value", p.what())
	}
	p.i += len(word)
	return &Value{Kind: k, Start: start, End: p.i, Str: word}, nil
}
