package toolpaths

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// Bounds on what a tool call may claim. A path comes from an agent's hook
// payload, its transcript or a patch it wrote: untrusted text, checked
// before it is kept.
const (
	// MaxPath bounds one path, in bytes (PATH_MAX on Linux).
	MaxPath = 4096
	// MaxPathsPerCall bounds the paths one tool call claims; a patch that
	// names more is cut there, and the cut is reported.
	MaxPathsPerCall = 1000
)

// CheckPath refuses a path that cannot be a file name an agent's tool
// wrote: empty, too long, not UTF-8, or holding a control character (a NUL,
// a line break, an escape sequence). The error names the problem and shows
// the path escaped.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("an empty path")
	case len(p) > MaxPath:
		return fmt.Errorf("a path of %d bytes (at most %d)", len(p), MaxPath)
	case !utf8.ValidString(p):
		return fmt.Errorf("a path that is not UTF-8: %s", termsafe.Name(p))
	}
	for _, r := range p {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("a path with a control character: %s", termsafe.Name(p))
		}
	}
	return nil
}
