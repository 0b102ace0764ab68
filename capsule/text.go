package capsule

import (
	"strings"
	"unicode/utf8"
)

// Text rules shared by the guards. Every length limit in this package
// counts characters (runes), never bytes: "é" is one character of a 280
// character status, as the seed and the capsule schema mean it.

// runeLen is the length of s in characters.
func runeLen(s string) int { return utf8.RuneCountInString(s) }

// trimmedLen is the length in characters of s without surrounding space,
// for minimums: "   ok   " is not a three-character title.
func trimmedLen(s string) int { return utf8.RuneCountInString(strings.TrimSpace(s)) }

// hasControl reports a C0 control character other than tab, newline and
// carriage return. JSON lets a client escape any of them (\u0000), and a
// NUL or an escape sequence in a stored note would break the terminals,
// logs and prompts it is later shown in.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return true
		}
	}
	return false
}

// checkText applies the length and control-character rules to one string
// field: more than max characters, or a control character, is refused with
// code at path. max <= 0 means no length limit.
func checkText(s string, max int, code, path string) *Error {
	if max > 0 {
		if n := runeLen(s); n > max {
			return Refuse(code, path, "is %d characters; the limit is %d (nothing is ever cut)", n, max)
		}
	}
	if hasControl(s) {
		return Refuse(code, path, "contains a control character (only tab, newline and carriage return are allowed)")
	}
	return nil
}

// isUUID reports whether s is a uuid in canonical 8-4-4-4-12 hex form
// (either case).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
