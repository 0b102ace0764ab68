package agentconf

import (
	"errors"
	"fmt"

	"github.com/continuityd/continuityd/internal/front/jsonedit"
	"github.com/continuityd/continuityd/internal/front/tomledit"
)

// Result is a file's new bytes and what changed in it.
type Result struct {
	Out []byte
	// Changes say what was added or taken out, for a person: "hooks for
	// SessionStart, Stop", "the status line, around yours".
	Changes []string
	// Notes say what was left alone and why, or what the user must do.
	Notes []string
	// Empty: nothing is left in the file but what a new one would hold
	// (an empty object, no TOML at all): the caller may remove it.
	Empty bool
}

// Changed reports whether the file's bytes change.
func (r Result) Changed(before []byte) bool {
	return string(r.Out) != string(before)
}

// SyntaxError is a file that does not parse, with where.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// syntax turns the parsers' errors into a SyntaxError.
func syntax(err error) error {
	var je *jsonedit.SyntaxError
	if errors.As(err, &je) {
		return &SyntaxError{je.Line, je.Col, je.Msg}
	}
	var te *tomledit.Error
	if errors.As(err, &te) {
		return &SyntaxError{te.Line, te.Col, te.Msg}
	}
	return err
}

// ShapeError is a file that parses but holds, where continuityd writes, a
// value of another type than the agent reads there.
type ShapeError struct {
	Line, Col int
	Msg       string
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// shapeErrorf names the position of JSON value v in src.
func shapeErrorf(src []byte, v *jsonedit.Value, format string, args ...any) error {
	line, col := jsonedit.Position(src, v.Start)
	return &ShapeError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}
