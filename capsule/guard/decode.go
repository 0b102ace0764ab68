package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// Strict decoding, shared by every body the guard reads.
//
// A body goes through three steps before any field is looked at:
//  1. size, then UTF-8 validity: encoding/json silently turns bad bytes
//     into U+FFFD, which would store something the client never sent;
//  2. one token walk over the whole body (checkJSON): exactly one JSON
//     object, no trailing data, no duplicate keys at any depth (encoding/json
//     would silently keep the last), nesting at most MaxJSONDepth, and no
//     \u escape of a lone UTF-16 surrogate (also silently replaced);
//  3. objects are then read member by member in document order
//     (readMembers) and each value decoded into its Go type.
//
// Step 3 deliberately does not use DisallowUnknownFields on a struct:
// encoding/json matches field names case-insensitively ("FOCUS" would be
// accepted as focus), names only the first unknown field in an error string
// and not its path, and does not report duplicates. Matching names exactly
// against a list gives each refusal its exact dotted path and code.

// member is one name/value pair of a JSON object, in document order.
type member struct {
	name  string
	value json.RawMessage
}

// checkBody runs steps 1 and 2 on a body of at most limit bytes.
func checkBody(body []byte, limit int) *capsule.Error {
	if len(body) > limit {
		return capsule.Refuse(capsule.CodeBodyTooLarge, "",
			"the body is %d bytes; the limit is %d", len(body), limit)
	}
	if !utf8.Valid(body) {
		return capsule.Refuse(capsule.CodeInvalidUTF8, "",
			"the body is not valid UTF-8 (first bad byte at offset %d); it was not changed or stored", firstInvalidUTF8(body))
	}
	if !quickCheckJSON(body) {
		if err := checkJSON(body); err != nil {
			return err
		}
	}
	if off := loneSurrogate(body); off >= 0 {
		return capsule.Refuse(capsule.CodeInvalidUTF8, "",
			"the body escapes a lone UTF-16 surrogate at offset %d, which is not a character", off)
	}
	return nil
}

// firstInvalidUTF8 returns the offset of the first byte that is not part of
// a valid UTF-8 sequence.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// frame is one open object or array in checkJSON's walk.
type frame struct {
	object bool
	path   string // dotted path for refusals
	hidden bool   // some key on the path is unsafe to repeat (isSafeName)
	index  int
	keys   map[string]struct{}
}

// checkJSON walks every token of body: one JSON object, nothing after it,
// no duplicate keys, bounded depth. The walk is iterative so a hostile body
// cannot grow the stack.
func checkJSON(body []byte) *capsule.Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers stay text: a huge exponent is not an error here
	tok, err := dec.Token()
	if err != nil {
		return jsonSyntaxRefusal(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return capsule.Refuse(capsule.CodeInvalidJSON, "", "body must be a JSON object")
	}
	stack := []frame{{object: true, keys: map[string]struct{}{}}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if !dec.More() {
			if _, err := dec.Token(); err != nil { // the closing } or ]
				return jsonSyntaxRefusal(err)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		path, hidden := "", top.hidden
		if top.object {
			kt, err := dec.Token()
			if err != nil {
				return jsonSyntaxRefusal(err)
			}
			key, _ := kt.(string) // the decoder insists on string keys
			hidden = hidden || !isSafeName(key)
			if !hidden {
				path = joinPath(top.path, key)
			}
			if _, dup := top.keys[key]; dup {
				if hidden {
					return capsule.Refuse(capsule.CodeInvalidJSON, "",
						"a key appears twice in one object (its name is not shown); each key may appear once")
				}
				return capsule.Refuse(capsule.CodeInvalidJSON, path, "duplicate key %s; each key may appear once", quoteName(key))
			}
			top.keys[key] = struct{}{}
		} else {
			path = indexPath(top.path, top.index)
			top.index++
		}
		vt, err := dec.Token()
		if err != nil {
			return jsonSyntaxRefusal(err)
		}
		if d, ok := vt.(json.Delim); ok {
			if len(stack) >= MaxJSONDepth {
				return capsule.Refuse(capsule.CodeInvalidJSON, "", "the body is nested deeper than %d levels", MaxJSONDepth)
			}
			nf := frame{object: d == '{', path: path, hidden: hidden}
			if nf.object {
				nf.keys = map[string]struct{}{}
			}
			stack = append(stack, nf)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return capsule.Refuse(capsule.CodeInvalidJSON, "", "unexpected data after the JSON object at offset %d", dec.InputOffset())
	}
	return nil
}

// jsonSyntaxRefusal turns a decoder error into INVALID_JSON with the offset
// when there is one. The decoder's own text is not used: for a bad
// character it quotes the character, and a message must never echo input.
func jsonSyntaxRefusal(err error) *capsule.Error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return capsule.Refuse(capsule.CodeInvalidJSON, "", "malformed JSON at offset %d", se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return capsule.Refuse(capsule.CodeInvalidJSON, "", "the body ends before the JSON object does")
	default:
		return capsule.Refuse(capsule.CodeInvalidJSON, "", "malformed JSON")
	}
}

// loneSurrogate returns the offset of a \u escape that encodes half of a
// UTF-16 surrogate pair without its other half, or -1. It assumes body is
// well-formed JSON, where a backslash only ever appears inside a string.
func loneSurrogate(body []byte) int {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if i+1 < len(body) && body[i+1] != 'u' {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		r, ok := hex4(i)
		if !ok {
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return i
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return i
		default:
			i += 5
		}
	}
	return -1
}

// readMembers reads a JSON object's members in document order. raw must
// already have passed checkJSON (as part of its body); a value that is not
// an object yields ok=false.
func readMembers(raw json.RawMessage) (ms []member, ok bool) {
	if ms, ok, slow := readMembersQuick(raw); !slow {
		return ms, ok
	}
	return readMembersSlow(raw)
}

// readMembersSlow is readMembers on encoding/json's decoder, for what the
// quick scan leaves to it.
func readMembersSlow(raw json.RawMessage) (ms []member, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, false
	}
	if d, isDelim := tok.(json.Delim); !isDelim || d != '{' {
		return nil, false
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		ms = append(ms, member{name: key, value: v})
	}
	return ms, true
}

// readArray reads a JSON array's elements; ok=false if raw is not an array.
func readArray(raw json.RawMessage) (els []json.RawMessage, ok bool) {
	if jsonKind(raw) != "array" {
		return nil, false
	}
	if err := json.Unmarshal(raw, &els); err != nil {
		return nil, false
	}
	return els, true
}

// jsonKind names the JSON type of a raw value, for messages that say what
// arrived without saying what it was.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// decodeString decodes a JSON string; anything else, null included, is
// refused with code at path.
func decodeString(raw json.RawMessage, code, path string) (string, *capsule.Error) {
	if k := jsonKind(raw); k != "string" {
		return "", capsule.Refuse(code, path, "must be a string, got %s", k)
	}
	if s, ok := plainJSONString(raw); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", capsule.Refuse(code, path, "must be a string")
	}
	return s, nil
}

// decodeNullableString decodes a string or null.
func decodeNullableString(raw json.RawMessage, code, path string) (capsule.NullableString, *capsule.Error) {
	if jsonKind(raw) == "null" {
		return capsule.NullableString{Set: true}, nil
	}
	s, err := decodeString(raw, code, path)
	if err != nil {
		return capsule.NullableString{}, capsule.Refuse(code, path, "must be a string or null, got %s", jsonKind(raw))
	}
	return capsule.NullableString{Set: true, Valid: true, Value: s}, nil
}

// decodeBool decodes a JSON boolean.
func decodeBool(raw json.RawMessage, code, path string) (bool, *capsule.Error) {
	if k := jsonKind(raw); k != "boolean" {
		return false, capsule.Refuse(code, path, "must be true or false, got %s", k)
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, capsule.Refuse(code, path, "must be true or false")
	}
	return b, nil
}

// decodeObject reads an object's members, refusing any other JSON type.
func decodeObject(raw json.RawMessage, code, path string) ([]member, *capsule.Error) {
	ms, ok := readMembers(raw)
	if !ok {
		return nil, capsule.Refuse(code, path, "must be an object, got %s", jsonKind(raw))
	}
	return ms, nil
}

// decodeArray reads an array's elements, refusing any other JSON type.
func decodeArray(raw json.RawMessage, code, path string) ([]json.RawMessage, *capsule.Error) {
	els, ok := readArray(raw)
	if !ok {
		return nil, capsule.Refuse(code, path, "must be an array, got %s", jsonKind(raw))
	}
	return els, nil
}

// unknownField refuses a member the API does not define, naming it when
// its name is safe to repeat.
func unknownField(code, parent, name string) *capsule.Error {
	if !isSafeName(name) {
		return capsule.Refuse(code, parent,
			"an unknown field whose name is not shown (it is long, unusual or credential-shaped)")
	}
	return capsule.Refuse(code, joinPath(parent, name), "unknown field %s", quoteName(name))
}

// joinPath appends an object key to a dotted path.
func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// indexPath appends an array index to a dotted path.
func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// isSafeName reports whether a field name may be repeated in a refusal: a
// short identifier-like name. Anything else might be a pasted value (a key
// name can be a secret too), so it is not echoed.
func isSafeName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	// A 64-character identifier can still be a token (ghp_…); those are
	// long and mix letters and digits, names mostly do not.
	return len(name) < 20 || !hasLetterAndDigit(name)
}

// quoteName quotes a field name for a message.
func quoteName(name string) string { return strconv.Quote(name) }

// CheckObject runs the steps every body goes through before its fields are
// looked at (size, UTF-8, one JSON object, no duplicate key at any depth),
// for an object that is split before its parts are decoded: an MCP tool's
// arguments, whose control fields are taken out and whose rest is the
// body. Decoding into a map first would keep the last of a duplicate key.
func CheckObject(body []byte, limit int) error {
	if err := checkBody(body, limit); err != nil {
		return err
	}
	return nil
}
