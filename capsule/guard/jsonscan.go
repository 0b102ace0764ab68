package guard

import (
	"encoding/json"
	"unicode/utf8"
)

// Fast paths for the two walks every body takes, checkJSON and readMembers.
// Both are written on encoding/json's Decoder.Token, which allocates per
// token and made body checks the largest CPU cost of a checkpoint. The fast
// paths only ever say "the slow walk would accept this, and here is what it
// would return"; anything unusual (an escaped key, a big object, deep
// nesting, any malformation) sends the body to the slow walk, which keeps
// every refusal and its wording. A differential test and fuzz target hold
// them to that.

// quickKeys bounds the keys per object the fast check compares pairwise;
// a larger object goes to the slow walk and its map.
const quickKeys = 32

// quickCheckJSON reports whether checkJSON would accept body, for the common
// case; false means "ask checkJSON" (which may still accept it).
func quickCheckJSON(body []byte) bool {
	if !json.Valid(body) {
		return false
	}
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	// One frame per open container. Where each key sits in body is kept
	// in keys, a stack too: an object's keys from its frame's first on
	// (a closed object's are dropped), so duplicates are found without
	// allocating; both live on this function's stack for common bodies.
	type frame struct {
		object bool
		first  int // the object's first key in keys
	}
	var frames [16]frame
	var keySlab [64][2]int
	stack, keys := frames[:0], keySlab[:0]
	expectKey := false
	for ; i < len(body); i++ {
		switch c := body[i]; c {
		case '{', '[':
			// checkJSON refuses opening a container with MaxJSONDepth open.
			if len(stack) >= MaxJSONDepth {
				return false
			}
			stack = append(stack, frame{object: c == '{', first: len(keys)})
			expectKey = c == '{'
		case '}', ']':
			keys = keys[:stack[len(stack)-1].first]
			stack = stack[:len(stack)-1]
			expectKey = false
		case ',':
			expectKey = stack[len(stack)-1].object
		case '"':
			end, escaped := skipString(body, i)
			if end < 0 {
				return false
			}
			if expectKey {
				mine := keys[stack[len(stack)-1].first:]
				if escaped || len(mine) >= quickKeys {
					return false
				}
				key := body[i+1 : end-1]
				if !utf8.Valid(key) { // the slow walk compares keys with U+FFFD for bad bytes
					return false
				}
				for _, k := range mine {
					if string(body[k[0]:k[1]]) == string(key) {
						return false
					}
				}
				keys = append(keys, [2]int{i + 1, end - 1})
				expectKey = false
			}
			i = end - 1
		}
	}
	return len(stack) == 0
}

// readMembersQuick is readMembers for the common case: ok as readMembers
// returns it, or slow=true when readMembers must decide. Values are
// sub-slices of raw, capped so an append cannot write into it.
func readMembersQuick(raw []byte) (ms []member, ok, slow bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) {
		return nil, false, true
	}
	if raw[i] != '{' {
		return nil, false, true // not an object: readMembers says so
	}
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil, true, false
	}
	ms = make([]member, 0, 4) // most objects: allocated once
	for i < len(raw) {
		if raw[i] != '"' {
			return nil, false, true
		}
		end, escaped := skipString(raw, i)
		if end < 0 || escaped {
			return nil, false, true
		}
		if !utf8.Valid(raw[i+1 : end-1]) { // decoding would replace bad bytes
			return nil, false, true
		}
		name := string(raw[i+1 : end-1])
		i = skipWS(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false, true
		}
		i = skipWS(raw, i+1)
		vend := skipValue(raw, i)
		if vend < 0 {
			return nil, false, true
		}
		ms = append(ms, member{name: name, value: raw[i:vend:vend]})
		i = skipWS(raw, vend)
		if i >= len(raw) {
			return nil, false, true
		}
		switch raw[i] {
		case ',':
			i = skipWS(raw, i+1)
		case '}':
			return ms, true, false
		default:
			return nil, false, true
		}
	}
	return nil, false, true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that opens at b[i]
// (a '"'), and whether it holds an escape; -1 if it never closes.
func skipString(b []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}

// skipValue returns the index just past the JSON value that starts at
// b[i], or -1. It assumes well-formed JSON and only keeps its bounds.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := skipString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default: // a number or a literal
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

// plainJSONString decodes a JSON string that needs no unescaping (no
// backslash, no control character, valid UTF-8), the common case, without
// encoding/json; ok=false leaves it to json.Unmarshal.
func plainJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}
