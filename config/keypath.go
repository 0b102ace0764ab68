package config

import (
	"strconv"
	"strings"
)

// Keys are named in errors the way a user finds them in the file: dotted,
// with the index of an array element in brackets ("agent[1].name",
// "upstream.qday.rate"). A key part that TOML would have to quote is quoted.
// The same spelling is used to look keys up in the document index, so every
// path is built with joinKey and indexKey, never by hand.

// joinKey appends one key part to a path.
func joinKey(path, part string) string {
	if !isBareKey(part) {
		part = strconv.Quote(part)
	}
	if path == "" {
		return part
	}
	return path + "." + part
}

// indexKey names element i of the array at path.
func indexKey(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// isBareKey reports whether TOML accepts part unquoted.
func isBareKey(part string) bool {
	if part == "" {
		return false
	}
	for i := 0; i < len(part); i++ {
		c := part[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// splitKey cuts a path into its parts: names (as spelled, quotes included)
// and indices ("[1]"). Dots and brackets inside a quoted part do not cut.
func splitKey(path string) []string {
	var parts []string
	start, quoted, escaped := 0, false, false
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == '.':
			if i > start {
				parts = append(parts, path[start:i])
			}
			start = i + 1
		case !quoted && c == '[':
			if i > start {
				parts = append(parts, path[start:i])
			}
			start = i
		case !quoted && c == ']':
			parts = append(parts, path[start:i+1])
			start = i + 1
		}
	}
	if start < len(path) {
		parts = append(parts, path[start:])
	}
	return parts
}

// joinParts is the inverse of splitKey.
func joinParts(parts []string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// parentKey is the path one level up: "a.b[2]" → "a.b" → "a" → "".
func parentKey(path string) string {
	parts := splitKey(path)
	if len(parts) == 0 {
		return ""
	}
	return joinParts(parts[:len(parts)-1])
}

// lastPart is the final part of a path, unquoted: the key as typed.
func lastPart(path string) string {
	parts := splitKey(path)
	if len(parts) == 0 {
		return ""
	}
	p := parts[len(parts)-1]
	if u, err := strconv.Unquote(p); err == nil {
		return u
	}
	return p
}

// schemaKey maps a path to its entry in the schema: array indices become
// "[]" and the user's name of an upstream table (in [upstream.NAME] and
// [agent.identity.NAME], [agent.delx_fleet.NAME]) becomes "*".
func schemaKey(path string) string {
	parts := splitKey(path)
	for i, p := range parts {
		switch {
		case strings.HasPrefix(p, "["):
			parts[i] = "[]"
		case i == 1 && parts[0] == "upstream":
			parts[i] = "*"
		case i == 3 && parts[0] == "agent" && (parts[2] == "identity" || parts[2] == "delx_fleet"):
			parts[i] = "*"
		}
	}
	return joinParts(parts)
}
