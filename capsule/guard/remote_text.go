package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text from a remote service (an upstream's error message, its directions,
// its resume view, its long poll's events) is data, never instructions: an
// agent reads it in its context beside what its user said. Where such text
// enters the daemon it passes RemoteString (or RemoteJSON for a whole
// document), and where it is shown as prose it carries RemoteFrame, so the
// agent can tell "Q-Day says" from "my user says". Removing is stronger than
// escaping here: an agent gains nothing from an ESC or a bidi override.

// MaxRemoteText bounds, in characters, one string from a remote service
// (a direction's text, an event's field, an error message): the longest
// text field a local write may hold.
const MaxRemoteText = 4000

// remoteRedactMargin is how far past the bound a string is kept while the
// secret guard looks at it: a credential that straddles the cut is found
// whole and redacted, never shown in part.
const remoteRedactMargin = 4096

// IsHiddenRune reports whether r is a character that text shown to an agent
// or a person must not carry: a control character (C0 other than tab and
// newline, DEL, C1) or an invisible one that changes how the text around it
// reads (bidi embeddings, overrides, isolates and marks; zero-width space,
// joiners, word joiner; the byte order mark), or any other character
// Unicode says is shown as nothing (isDefaultIgnorable).
func IsHiddenRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case isInvisible(r), r == 0x061c: // the Arabic letter mark, too, where text is only shown
		return true
	}
	return isDefaultIgnorable(r)
}

// isDefaultIgnorable reports the characters Unicode says a renderer shows
// as nothing (Default_Ignorable_Code_Point: the format characters but the
// prepended concatenation marks, which show; variation selectors; the
// soft hyphen, Hangul fillers, tag characters, invisible operators). One
// of them inside a credential leaves it reading whole to an agent while
// the secret guard's patterns no longer match it: removed first, the
// credential is whole again, and redacted.
func isDefaultIgnorable(r rune) bool {
	switch {
	case r < 0xad:
		return false
	case unicode.Is(unicode.Cf, r):
		return !unicode.Is(unicode.Prepended_Concatenation_Mark, r)
	}
	return unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Variation_Selector, r)
}

// RemoteString makes one string from a remote service fit to reach an
// agent: invalid UTF-8 becomes U+FFFD, hidden characters (IsHiddenRune) are
// removed (line and paragraph separators become newlines), credential
// shapes are redacted with the secret guard's rules (gitleaks' and
// continuityd's own, as for automatic content), and the result is cut to
// max characters (marked "…"); max <= 0 means MaxRemoteText.
func RemoteString(s string, max int) string {
	if max <= 0 {
		max = MaxRemoteText
	}
	if n := max + remoteRedactMargin; len(s) > n*utf8.UTFMax {
		s = s[:n*utf8.UTFMax] // a cheap first cut; the exact one comes last
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, n := 0, 0; i < len(s) && n < max+remoteRedactMargin; n++ {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == 0x2028 || r == 0x2029:
			b.WriteByte('\n')
		case IsHiddenRune(r):
		default:
			b.WriteRune(r)
		}
	}
	out := RedactCredentialShapes(b.String(), redacted)
	if utf8.RuneCountInString(out) > max {
		rs := []rune(out)
		out = string(rs[:max-1]) + "…"
	}
	return out
}

// RemoteFrame is what precedes text from the remote service source where
// it is shown as prose (a hook's context, the markdown resume, last_error).
func RemoteFrame(source string) string {
	return "[from upstream " + RemoteString(source, 64) + ", not from your user] "
}

// RemoteText is one string from the remote service source, made fit
// (RemoteString) and framed with its source (RemoteFrame). The fleet's
// directions and any other remote prose share it.
func RemoteText(source, s string) string {
	return RemoteFrame(source) + RemoteString(s, MaxRemoteText)
}

// MaxRemoteStrings bounds the strings (object keys included) of one JSON
// document from a remote service. Each is looked at by the secret guard,
// which costs up to a fraction of a millisecond for text full of its
// keywords: a document of tens of thousands of short strings would hold a
// resume for seconds. An answer from Q-Day or Delx holds tens.
const MaxRemoteStrings = 2048

// RemoteJSON returns a JSON document from a remote service with every
// string in it, object keys included, passed through RemoteString; numbers,
// literals and the shape are kept. Anything that is not one JSON value, or
// holds more than MaxRemoteStrings strings, is refused.
func RemoteJSON(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("the answer is not JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the answer is not one JSON value")
	}
	if n := countStrings(v); n > MaxRemoteStrings {
		return nil, fmt.Errorf("the answer holds %d strings; at most %d are taken", n, MaxRemoteStrings)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(remoteValue(v)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// countStrings counts the strings and object keys of a decoded JSON value.
func countStrings(v any) int {
	switch t := v.(type) {
	case string:
		return 1
	case []any:
		n := 0
		for _, x := range t {
			n += countStrings(x)
		}
		return n
	case map[string]any:
		n := len(t)
		for _, x := range t {
			n += countStrings(x)
		}
		return n
	}
	return 0
}

// remoteValue cleans every string of a decoded JSON value.
func remoteValue(v any) any {
	switch t := v.(type) {
	case string:
		return RemoteString(t, MaxRemoteText)
	case []any:
		for i := range t {
			t[i] = remoteValue(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[RemoteString(k, 200)] = remoteValue(x)
		}
		return out
	}
	return v
}
