package termsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A file name is bytes: it may hold a line break, a backslash, or bytes
// that are not UTF-8, which neither JSON nor a person's terminal carries
// as they are (encoding/json would turn them into U+FFFD, and the name
// would no longer name the file). Where a name must go out as text and
// come back exact (a --path, a path in a JSON body or answer), it takes
// one form, the one Name prints: as it is when it is valid UTF-8 and does
// not begin with a double quote; otherwise in double quotes with C
// escapes, as git quotes names ("\377.txt", "a\nb", "say \"hi\""). Read
// back, a text that begins with a double quote is unquoted with Go's (C's)
// escapes (\n, \t, \\, \", \377, \xff, \u202e); any other text is the name
// itself, backslashes and all. So what a command prints can be pasted
// back as its argument, and a name round-trips whatever its bytes.

// Exact returns name in the form that comes back exact through
// ParseExact and is valid UTF-8: name itself when it is valid UTF-8 and
// does not begin with a double quote, else Name(name).
func Exact(name string) string {
	if utf8.ValidString(name) && !strings.HasPrefix(name, `"`) {
		return name
	}
	return Name(name)
}

// ParseExact returns the name s stands for (see Exact): s unquoted when it
// begins with a double quote, s itself otherwise. A quoted s that is not
// well formed (no closing quote, an unknown escape) is an error saying so.
func ParseExact(s string) (string, error) {
	if !strings.HasPrefix(s, `"`) {
		return s, nil
	}
	name, err := strconv.Unquote(s)
	if err != nil {
		return "", fmt.Errorf("%s begins with a double quote but is not a quoted name (\"…\" with C escapes such as \\n, \\\\, \\\" or \\377)", Name(s))
	}
	return name, nil
}

// ShowExact is Name of the name s stands for (see Exact): how a name that
// came in its exact form is shown on a line. A malformed s is shown as it is,
// escaped.
func ShowExact(s string) string {
	name, err := ParseExact(s)
	if err != nil {
		return Name(s)
	}
	return Name(name)
}
