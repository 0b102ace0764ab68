package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error is one problem in a configuration file, at the position of the key it
// concerns. Line and Column are 1-based byte positions as go-toml counts
// them; both are 0 when the key is not in the file (a default value that
// turned out unusable, such as a socket path too long for the platform).
type Error struct {
	File   string
	Line   int
	Column int
	Key    string // dotted path such as "agent[1].name"; "" when unknown (some syntax errors)
	Msg    string // ends with "(got VALUE)" when the value is safe to show
}

// Error formats the problem as FILE:LINE:COL: KEY: MESSAGE, the shape
// editors and terminals turn into a link.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one configuration, in file order. Decode
// reports them all at once so that a user fixes a file in one round.
type Errors []*Error

// Error prints one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each *Error to errors.As and errors.Is.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// sortErrors puts the errors in file order; problems with no position (from
// defaults) come last, since the user cannot point at them in the file.
func sortErrors(es Errors) {
	slices.SortStableFunc(es, func(a, b *Error) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

// maxShown bounds how much of a value an error message repeats: enough to
// recognise it, not enough to flood a terminal.
const maxShown = 80

// got renders a value for the "(got VALUE)" suffix of a message. Strings are
// quoted so that an empty or blank value is visible.
func got(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = strconv.Quote(shorten(v))
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	default:
		s = shorten(fmt.Sprint(v))
	}
	return " (got " + s + ")"
}

// shorten cuts s to maxShown bytes, between runes, marking the cut.
func shorten(s string) string {
	if len(s) <= maxShown {
		return s
	}
	n := maxShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
