package handoff

import "strings"

// The little Markdown this package needs: ATX headings and fenced code
// blocks, after CommonMark, so that a "# …" line inside a code sample is
// never taken for a heading.

// indent returns line without up to three leading spaces, and whether it
// had at most three (four or more make an indented code block).
func indent(line string) (string, bool) {
	for i := 0; i < 4; i++ {
		if i == len(line) || line[i] != ' ' {
			return line[i:], true
		}
	}
	return line, false
}

// atxHeading returns the text of an ATX heading line: "#" to "######"
// followed by a space, a tab or the end of the line, with the optional
// closing run of "#" removed.
func atxHeading(line string) (string, bool) {
	rest, ok := indent(line)
	if !ok {
		return "", false
	}
	level := 0
	for level < len(rest) && rest[level] == '#' {
		level++
	}
	if level == 0 || level > 6 {
		return "", false
	}
	rest = rest[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // "#hashtag" is text
	}
	rest = strings.Trim(rest, " \t")
	// A closing sequence is a run of '#' that is the whole text or follows
	// a space: "## Goal ##" is "Goal", "## C#" is "C#".
	if trimmed := strings.TrimRight(rest, "#"); trimmed == "" {
		rest = ""
	} else if len(trimmed) < len(rest) && (trimmed[len(trimmed)-1] == ' ' || trimmed[len(trimmed)-1] == '\t') {
		rest = strings.TrimRight(trimmed, " \t")
	}
	return rest, true
}

// normalize folds a heading's text for matching against the section names:
// lower case, no trailing colon, "-" and "_" as spaces, single spaces.
func normalize(name string) string {
	name = strings.TrimSpace(name)
	name = strings.TrimSpace(strings.TrimSuffix(name, ":"))
	name = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return ' '
		}
		return r
	}, strings.ToLower(name))
	return strings.Join(strings.Fields(name), " ")
}

// fenceState follows fenced code blocks (``` or ~~~, three or more).
type fenceState struct {
	open bool
	char byte
	n    int
}

// opens reports whether line opens a fence, and if so enters it.
func (f *fenceState) opens(line string) bool {
	rest, ok := indent(line)
	if !ok || len(rest) < 3 || rest[0] != '`' && rest[0] != '~' {
		return false
	}
	c := rest[0]
	n := 0
	for n < len(rest) && rest[n] == c {
		n++
	}
	if n < 3 {
		return false
	}
	// A backtick fence's info string cannot hold a backtick (that is
	// inline code: ```foo``` ).
	if c == '`' && strings.IndexByte(rest[n:], '`') >= 0 {
		return false
	}
	*f = fenceState{open: true, char: c, n: n}
	return true
}

// closes leaves the fence if line closes it: the same character, at least
// as many, nothing after but spaces and tabs.
func (f *fenceState) closes(line string) {
	rest, ok := indent(line)
	if !ok {
		return
	}
	n := 0
	for n < len(rest) && rest[n] == f.char {
		n++
	}
	if n >= f.n && strings.Trim(rest[n:], " \t") == "" {
		*f = fenceState{}
	}
}

// trimBlankLines removes leading and trailing blank (whitespace-only)
// lines and the final line break, and keeps everything between exactly.
func trimBlankLines(s string) string {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			if strings.TrimSpace(s) == "" {
				return ""
			}
			break
		}
		if strings.TrimSpace(s[:i]) != "" {
			break
		}
		s = s[i+1:]
	}
	for {
		s = strings.TrimSuffix(s, "\n")
		s = strings.TrimRight(s, "\r") // line ending, as in Parse
		i := strings.LastIndexByte(s, '\n')
		if strings.TrimSpace(s[i+1:]) != "" {
			return s
		}
		if i < 0 {
			return ""
		}
		s = s[:i]
	}
}

// listMarker returns the length of the list marker that starts line (after
// up to three spaces of indent, counted in the length): "- ", "* ", "+ ",
// or one to nine digits then "." or ")" and a space or tab; 0 if none.
func listMarker(line string) int {
	rest, ok := indent(line)
	if !ok {
		return 0
	}
	lead := len(line) - len(rest)
	n := 0
	switch {
	case rest != "" && (rest[0] == '-' || rest[0] == '*' || rest[0] == '+'):
		n = 1
	default:
		for n < len(rest) && n < 9 && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 0 || n == len(rest) || rest[n] != '.' && rest[n] != ')' {
			return 0
		}
		n++
	}
	if n >= len(rest) || rest[n] != ' ' && rest[n] != '\t' {
		return 0
	}
	return lead + n + 1
}

// stripSingleItemMarker takes the list marker off body when body is one
// list item: its first line starts with a marker and no later line does
// (a later line is that item's continuation). A body of several items, or
// of text that is not a list, is returned as it is.
func stripSingleItemMarker(body string) string {
	n := listMarker(body)
	if n == 0 {
		return body
	}
	for _, line := range strings.Split(body, "\n")[1:] {
		if listMarker(line) > 0 {
			return body
		}
	}
	return strings.TrimLeft(body[n:], " \t")
}
