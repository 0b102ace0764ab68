package transcript

import (
	"unicode"
	"unicode/utf8"
)

// The only strings a Tracker keeps are identifiers. Each must look like one,
// so that a placeholder, a redaction marker or a stray piece of text in an
// odd record can never ride along into the daemon's state.

const (
	maxSessionID = 128
	maxPath      = 4096
)

// validSessionID accepts the ids the agents use (UUIDs, ULID-like and
// slug-like ids): 1–128 ASCII letters, digits, '-', '_', '.' or ':'.
func validSessionID(s string) bool {
	if s == "" || len(s) > maxSessionID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// validCwd accepts an absolute path, POSIX ("/…") or Windows ("C:\…",
// "\\server\…"), of valid UTF-8 without control characters. It does not
// consult the local OS: a transcript may come from another machine.
func validCwd(s string) bool {
	if s == "" || len(s) > maxPath || !utf8.ValidString(s) {
		return false
	}
	abs := s[0] == '/' ||
		len(s) >= 3 && isASCIILetter(s[0]) && s[1] == ':' && (s[2] == '\\' || s[2] == '/') ||
		len(s) >= 2 && s[0] == '\\' && s[1] == '\\'
	if !abs {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
