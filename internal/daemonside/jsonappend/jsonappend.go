// Package jsonappend writes JSON by appending to a byte slice, without
// reflection, for the few documents the daemon encodes on every write (the
// residency's state document, the state a checkpoint answers with, the
// write-ahead log's records). encoding/json spends half of such a document
// on its time stamps alone (time.Time is a json.Marshaler, whose output it
// parses again); a Writer appends them with time.Time.AppendFormat.
//
// A Writer's output is byte for byte what encoding/json gives for the same
// value: whatever it does not write fast (a string with a character to
// escape, a float, a raw message, any other value) goes through
// encoding/json itself (Value). Its users keep that promise with a test that
// compares the two on values filled at random (internal/daemonside/jsonappend/
// jsonappendtest).
package jsonappend

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Writer appends JSON to B. The zero Writer escapes no HTML, as a
// json.Encoder after SetEscapeHTML(false); set EscapeHTML for what
// json.Marshal gives.
//
// Objects and arrays need no bookkeeping: Key and Elem add the comma
// unless the value is the first of its object or array.
type Writer struct {
	B          []byte
	EscapeHTML bool
	err        error
}

// Err returns the first error of an encoding (a time outside what RFC 3339
// can write, a value encoding/json refuses), or nil.
func (w *Writer) Err() error { return w.err }

// BeginObject opens an object.
func (w *Writer) BeginObject() { w.B = append(w.B, '{') }

// EndObject closes an object.
func (w *Writer) EndObject() { w.B = append(w.B, '}') }

// BeginArray opens an array.
func (w *Writer) BeginArray() { w.B = append(w.B, '[') }

// EndArray closes an array.
func (w *Writer) EndArray() { w.B = append(w.B, ']') }

// comma separates a value from the one before it in its object or array.
// No value ends with '{' or '[', so either means the value is the first.
func (w *Writer) comma() {
	if n := len(w.B); n > 0 && w.B[n-1] != '{' && w.B[n-1] != '[' {
		w.B = append(w.B, ',')
	}
}

// Key starts the member named name, which must be a plain name (letters,
// digits, underscores: a struct tag's), written as it is.
func (w *Writer) Key(name string) {
	w.comma()
	w.B = append(w.B, '"')
	w.B = append(w.B, name...)
	w.B = append(w.B, '"', ':')
}

// StringField writes the member name with the string s.
func (w *Writer) StringField(name, s string) {
	w.Key(name)
	w.String(s)
}

// OmitEmptyString writes the member name with s unless s is empty, as
// encoding/json does a string field tagged omitempty.
func (w *Writer) OmitEmptyString(name, s string) {
	if s != "" {
		w.StringField(name, s)
	}
}

// TimeField writes the member name with the time t.
func (w *Writer) TimeField(name string, t time.Time) {
	w.Key(name)
	w.Time(t)
}

// IntField writes the member name with the integer v.
func (w *Writer) IntField(name string, v int) {
	w.Key(name)
	w.Int(int64(v))
}

// UintField writes the member name with the unsigned integer v.
func (w *Writer) UintField(name string, v uint64) {
	w.Key(name)
	w.Uint(v)
}

// Elem starts an array element.
func (w *Writer) Elem() { w.comma() }

// Null writes null.
func (w *Writer) Null() { w.B = append(w.B, "null"...) }

// Bool writes a boolean.
func (w *Writer) Bool(v bool) { w.B = strconv.AppendBool(w.B, v) }

// Int writes an integer.
func (w *Writer) Int(v int64) { w.B = strconv.AppendInt(w.B, v, 10) }

// Uint writes an unsigned integer.
func (w *Writer) Uint(v uint64) { w.B = strconv.AppendUint(w.B, v, 10) }

// String writes a string. One with nothing to escape is copied; any
// other goes through encoding/json, so that the escaping (and the repair
// of invalid UTF-8) is encoding/json's own.
func (w *Writer) String(s string) {
	if !w.plain(s) {
		w.Value(s)
		return
	}
	w.B = append(w.B, '"')
	w.B = append(w.B, s...)
	w.B = append(w.B, '"')
}

// plain reports whether s is printable ASCII with no quote, backslash
// or, when escaping HTML, <, > or &.
func (w *Writer) plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
		if w.EscapeHTML && (c == '<' || c == '>' || c == '&') {
			return false
		}
	}
	return true
}

// StringPtr writes a string, or null for nil.
func (w *Writer) StringPtr(s *string) {
	if s == nil {
		w.Null()
		return
	}
	w.String(*s)
}

// Strings writes a list of strings; nil is null, as encoding/json has it.
func (w *Writer) Strings(xs []string) {
	if xs == nil {
		w.Null()
		return
	}
	w.BeginArray()
	for _, s := range xs {
		w.Elem()
		w.String(s)
	}
	w.EndArray()
}

// StringIntMap writes a map of counts, its keys sorted; nil is null.
func (w *Writer) StringIntMap(m map[string]int) {
	if m == nil {
		w.Null()
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	w.BeginObject()
	for _, k := range keys {
		w.comma()
		w.String(k)
		w.B = append(w.B, ':')
		w.Int(int64(m[k]))
	}
	w.EndObject()
}

// Time writes t as time.Time.MarshalJSON does (RFC 3339 with nanoseconds).
// A time RFC 3339 cannot write (a year outside 0–9999, a zone offset of a
// day or more) is left to MarshalJSON, for its error.
func (w *Writer) Time(t time.Time) {
	start := len(w.B)
	w.B = append(w.B, '"')
	w.B = t.AppendFormat(w.B, time.RFC3339Nano)
	w.B = append(w.B, '"')
	if !strictRFC3339(w.B[start+1 : len(w.B)-1]) {
		w.B = w.B[:start]
		w.Value(t)
	}
}

// strictRFC3339 reports whether b, a time formatted as RFC 3339, is one
// RFC 3339 allows: a four-digit year, and a zone offset under 24 hours
// without seconds.
func strictRFC3339(b []byte) bool {
	if len(b) < len("2006-01-02T15:04:05Z") || b[4] != '-' {
		return false
	}
	if b[len(b)-1] == 'Z' {
		return true
	}
	zone := b[len(b)-len("-07:00"):]
	if c := zone[0]; c != '+' && c != '-' {
		return false // an offset with seconds: -07:00:00
	}
	return (zone[1]-'0')*10+zone[2]-'0' < 24
}

// TimePtr writes a time, or null for nil.
func (w *Writer) TimePtr(t *time.Time) {
	if t == nil {
		w.Null()
		return
	}
	w.Time(*t)
}

// Raw writes b, which must be the compact JSON encoding/json would give for
// the value in this Writer's mode (what another Writer, or json.Marshal for
// EscapeHTML, produced).
func (w *Writer) Raw(b []byte) { w.B = append(w.B, b...) }

// Value writes v through encoding/json, with this Writer's escaping: for
// what the Writer has no fast path for.
func (w *Writer) Value(v any) {
	if w.EscapeHTML {
		b, err := json.Marshal(v)
		w.fail(err)
		w.B = append(w.B, b...)
		return
	}
	buf := bytes.NewBuffer(w.B)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	start := len(w.B)
	if err := enc.Encode(v); err != nil {
		w.fail(err)
		w.B = buf.Bytes()[:start]
		return
	}
	w.B = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func (w *Writer) fail(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}
