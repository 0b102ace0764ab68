package transcript

import (
	"encoding/json"
	"math"
	"strconv"
)

// The agents' formats drift from release to release (SOURCES.md: the
// drift catalogs). A field that changes type must not make a well-formed
// line an error, and must not turn into a plausible wrong number either. So
// every field the tracker reads is decoded through one of the lenient types
// below: they never fail, and they remember whether the value had the
// expected shape, so each rule can decide for itself what an odd field
// means.

// maxCount bounds any token count. No context window comes near it, and
// sums of a few counts stay far from int64 overflow.
const maxCount = 1 << 40

// num is a non-negative integer count. Absent and null leave it unset; any
// other shape (a string, a fraction, a negative or absurd number) marks it
// bad.
type num struct {
	v        int64
	set, bad bool
}

func (n *num) UnmarshalJSON(b []byte) error {
	*n = num{}
	if string(b) == "null" {
		return nil
	}
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		if v >= 0 && v <= maxCount {
			n.v, n.set = v, true
			return nil
		}
		n.bad = true
		return nil
	}
	// Integral values written as 1e5 or 100.0 are still counts.
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f < 0 || f > maxCount || f != math.Trunc(f) {
		n.bad = true
		return nil
	}
	n.v, n.set = int64(f), true
	return nil
}

// ok reports whether the count is usable: absent counts as 0, bad does not.
func (n num) ok() bool { return !n.bad }

// str is a JSON string; anything else leaves it unset.
type str struct {
	v  string
	ok bool
}

func (s *str) UnmarshalJSON(b []byte) error {
	*s = str{}
	if len(b) > 0 && b[0] == '"' && json.Unmarshal(b, &s.v) == nil {
		s.ok = true
	}
	return nil
}

// flag is a JSON boolean. Absent and null leave it unset; any other shape
// marks it bad.
type flag struct {
	v, set, bad bool
}

func (f *flag) UnmarshalJSON(b []byte) error {
	*f = flag{}
	switch string(b) {
	case "true":
		f.v, f.set = true, true
	case "false":
		f.set = true
	case "null":
	default:
		f.bad = true
	}
	return nil
}

// obj is a nested JSON object decoded into T, whose fields are themselves
// lenient. Anything but an object leaves ok false.
type obj[T any] struct {
	v  T
	ok bool
}

func (o *obj[T]) UnmarshalJSON(b []byte) error {
	*o = obj[T]{}
	if len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &o.v) == nil {
		o.ok = true
	}
	return nil
}

// decodeLine decodes one JSONL record into v (a struct of lenient fields).
// Only malformed JSON, or a line that is not a JSON object, is an error.
func decodeLine(line []byte, v any) error {
	if len(line) == 0 || line[0] != '{' {
		return errNotObject
	}
	return json.Unmarshal(line, v)
}
