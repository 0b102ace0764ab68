// Package termsafe makes text safe to show a person: a terminal, a pager or
// an agent's context never receives a raw control character from it. A file
// name, a trigger or a message that came from a workdir, the fleet or an
// upstream may hold ESC sequences that recolour, retitle or clear a
// terminal (hiding the "remove" lines of a dry run), or invisible
// formatting that makes text read differently from what it is. What would
// act on the screen is written out visibly instead, the way git writes
// names with core.quotePath: C escapes (\n, \t, \033) for bytes, \u202e
// for the C1 controls and the invisible formatting characters, \ooo for
// bytes that are not UTF-8.
//
// Name is for one name on a line (a path, an id): quoted in double quotes
// when anything in it needed escaping, as git does. Line is for free text
// that must stay on its line (a table cell, an error after a colon):
// escaped in place, newlines and tabs too, without quotes. Text is for
// free text that keeps its lines (markdown, messages): newlines and tabs
// stay, the rest is escaped in place. Both leave ordinary text,
// non-ASCII letters included, exactly as it is. JSON output needs neither:
// encoding/json escapes control characters itself. Exact and ParseExact
// carry a name whose bytes must come back exact where it passes as text
// (a --path, a path in JSON): the form Name prints, read back.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// mode is what one of Name, Line and Text escapes beyond the unsafe runes.
type mode int

const (
	modeName mode = iota // quoted: newline, tab, backslash and double quote escaped too
	modeLine             // newline and tab escaped, no quotes
	modeText             // newline and tab kept
)

// Name returns s as it can be shown on one line: unchanged when it holds
// nothing to escape, otherwise in double quotes with every control
// character (newlines and tabs too), backslash and double quote escaped
// C-style, e.g. "esc\033[31m.txt".
func Name(s string) string {
	if !needs(s, modeName) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteByte('"')
	escape(&b, s, modeName)
	b.WriteByte('"')
	return b.String()
}

// Line returns s escaped in place to stay on one line: every control
// character, newlines and tabs included, written out visibly; quotes and
// backslashes are left as they are.
func Line(s string) string {
	if !needs(s, modeLine) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	escape(&b, s, modeLine)
	return b.String()
}

// Text returns s with everything that would act on a terminal escaped
// visibly in place; newlines and tabs are kept, so the text keeps its
// lines. Backslashes are left alone: Text never adds quotes, so nothing it
// writes can be confused with a closing quote.
func Text(s string) string {
	if !needs(s, modeText) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	escape(&b, s, modeText)
	return b.String()
}

// needs reports whether s has anything to escape in mode m.
func needs(s string, m mode) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if special(r, size, m) {
			return true
		}
		i += size
	}
	return false
}

// special reports whether r (decoded from size bytes) is escaped in mode m.
func special(r rune, size int, m mode) bool {
	switch {
	case r == '\n' || r == '\t':
		return m != modeText
	case r == '"' || r == '\\':
		return m == modeName
	}
	return unsafeRune(r, size)
}

// unsafeRune reports whether r (decoded from size bytes) must not reach a
// terminal as it is: a C0 control, DEL, a C1 control, an invisible
// formatting character, or a byte that is not UTF-8.
func unsafeRune(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	}
	return invisible(r)
}

// invisible reports the formatting characters that change how the text
// around them reads without showing themselves: bidi embeddings, overrides,
// isolates and marks, zero-width spaces and joiners, the word joiner, the
// byte-order mark, and the line and paragraph separators.
func invisible(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r >= 0x200b && r <= 0x200f:
		return true
	}
	switch r {
	case 0x2060, 0xfeff, 0x061c, 0x2028, 0x2029:
		return true
	}
	return false
}

// cEscapes are the short C escapes git uses.
var cEscapes = [...]string{'\a': `\a`, '\b': `\b`, '\t': `\t`, '\n': `\n`, '\v': `\v`, '\f': `\f`, '\r': `\r`}

// escape writes s to b with what mode m escapes written out: a byte as
// git does (\n, \t, \033, \377 for one that is not UTF-8), a C1 control
// or an invisible character as \u202e, a quote or a backslash after a
// backslash.
func escape(b *strings.Builder, s string, m mode) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !special(r, size, m):
			b.WriteString(s[i : i+size])
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == utf8.RuneError && size == 1, r < 0x20 || r == 0x7f:
			if int(s[i]) < len(cEscapes) && cEscapes[s[i]] != "" {
				b.WriteString(cEscapes[s[i]])
			} else {
				fmt.Fprintf(b, `\%03o`, s[i])
			}
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
		i += size
	}
}
