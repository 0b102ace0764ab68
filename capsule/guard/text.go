package guard

import (
	"strings"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// Text rules shared by the guards. Every length limit in this package
// counts characters (runes), never bytes: "é" is one character of a 280
// character status, as the seed and the capsule schema mean it.

// runeLen is the length of s in characters.
func runeLen(s string) int { return utf8.RuneCountInString(s) }

// trimmedLen is the length in characters of s without surrounding space,
// for minimums: "   ok   " is not a three-character title.
func trimmedLen(s string) int { return utf8.RuneCountInString(strings.TrimSpace(s)) }

// firstControl returns the first control character in s that stored text
// may not hold, or -1: C0 other than tab, newline and carriage return, DEL
// (U+007F) and C1 (U+0080..U+009F). JSON lets a client escape any of them
// (\u0000), and a NUL, an ESC, or C1's NEL and CSI (U+009B, the 8-bit
// escape introducer that starts a terminal escape sequence on its own) in a
// stored note would break the terminals, logs and prompts it is later shown
// in. s is valid UTF-8 (the decoders check that first), so C1 is exactly
// the two-byte sequences C2 80..C2 9F; a byte-wise scan finds all of them
// without decoding runes.
func firstControl(s string) rune {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r', c == 0x7f:
			return rune(c)
		case c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f:
			return rune(s[i+1])
		}
	}
	return -1
}

// isInvisible reports whether r is an invisible formatting character that
// stored text may not hold: the bidi embeddings and overrides
// (U+202A..U+202E), the bidi isolates (U+2066..U+2069) and marks (U+200E,
// U+200F), the zero-width
// space, non-joiner and joiner (U+200B..U+200D), the word joiner (U+2060)
// and the zero-width no-break space or byte order mark (U+FEFF). None
// shows, and each can make a focus or a file name read differently from
// what it is (a right-to-left override turns "txt.exe" around).
func isInvisible(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r == 0x200E || r == 0x200F ||
		r >= 0x200B && r <= 0x200D || r == 0x2060 || r == 0xFEFF
}

// firstInvisible returns the first invisible formatting character in s
// (isInvisible), or -1. Each is three bytes of UTF-8 starting E2 or EF, so
// strings without those bytes are passed over without decoding runes.
func firstInvisible(s string) rune {
	if strings.IndexByte(s, 0xe2) < 0 && strings.IndexByte(s, 0xef) < 0 {
		return -1
	}
	for _, r := range s {
		if isInvisible(r) {
			return r
		}
	}
	return -1
}

// stripInvisible removes every invisible formatting character from s
// (automatic content is kept rather than refused).
func stripInvisible(s string) string {
	if firstInvisible(s) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isInvisible(r) {
			return -1
		}
		return r
	}, s)
}

// checkText applies the length, control-character and invisible-character rules to one string
// field: more than max characters, or a control character, is refused with
// code at path. max <= 0 means no length limit.
func checkText(s string, max int, code, path string) *capsule.Error {
	if max > 0 {
		if n := runeLen(s); n > max {
			return capsule.Refuse(code, path, "is %d characters; the limit is %d (nothing is ever cut)", n, max)
		}
	}
	return checkControl(s, code, path)
}

// checkControl refuses s with code at path when it holds a control
// character or an invisible formatting character (isInvisible), naming the
// character (never the text around it).
func checkControl(s, code, path string) *capsule.Error {
	if r := firstControl(s); r >= 0 {
		return capsule.Refuse(code, path, "contains the control character U+%04X; only tab, newline and carriage return are allowed", r)
	}
	if r := firstInvisible(s); r >= 0 {
		return capsule.Refuse(code, path, "contains the invisible formatting character U+%04X (a bidi control or a zero-width character), which makes text read differently from what it is", r)
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
