// Package udiff writes the unified diff of two texts, as `diff -u` does,
// for a person to read what a change to their file would be before it is
// made. The edits it shows are a few lines in a file of many: the common
// start and end are set aside and the lines between are compared whole.
package udiff

import (
	"fmt"
	"strings"
)

// context is the number of unchanged lines shown around a change.
const context = 3

// maxCells bounds the table of the comparison; past it the middle of the
// two texts is shown as removed and added whole, a diff all the same.
const maxCells = 4 << 20

// op is one line of the edit script.
type op struct {
	kind byte // ' ', '-' or '+'
	line string
}

// Unified returns the diff of a (named oldName) into b (newName), "" when
// they are the same. Names are written as given; "/dev/null" for a file
// that does not exist is the caller's to pass.
func Unified(oldName, newName string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	x, y := lines(string(a)), lines(string(b))
	script := diff(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldName, newName)
	for _, h := range hunks(script) {
		out.WriteString(h)
	}
	return out.String()
}

// lines splits s after each newline; the last line may lack one.
func lines(s string) []string {
	var l []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			l = append(l, s)
			break
		}
		l = append(l, s[:i+1])
		s = s[i+1:]
	}
	return l
}

// diff returns an edit script from x to y: the longest common subsequence
// of the lines between their common start and end.
func diff(x, y []string) []op {
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var script []op
	for _, l := range x[:pre] {
		script = append(script, op{' ', l})
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	script = append(script, middle(mx, my)...)
	for _, l := range x[len(x)-suf:] {
		script = append(script, op{' ', l})
	}
	return script
}

func middle(x, y []string) []op {
	n, m := len(x), len(y)
	if n*m > maxCells {
		var s []op
		for _, l := range x {
			s = append(s, op{'-', l})
		}
		for _, l := range y {
			s = append(s, op{'+', l})
		}
		return s
	}
	// lcs[i][j]: the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var s []op
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			s = append(s, op{' ', x[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			s = append(s, op{'-', x[i]})
			i++
		default:
			s = append(s, op{'+', y[j]})
			j++
		}
	}
	for ; i < n; i++ {
		s = append(s, op{'-', x[i]})
	}
	for ; j < m; j++ {
		s = append(s, op{'+', y[j]})
	}
	return s
}

// hunks groups the script's changes with their context lines.
func hunks(s []op) []string {
	var out []string
	for i := 0; i < len(s); {
		for i < len(s) && s[i].kind == ' ' {
			i++
		}
		if i == len(s) {
			break
		}
		start := max(0, i-context)
		// Extend over changes closer together than twice the context.
		end, quiet := i, 0
		for end < len(s) {
			if s[end].kind == ' ' {
				quiet++
				if quiet > 2*context {
					break
				}
			} else {
				quiet = 0
			}
			end++
		}
		end -= max(0, quiet-context)
		out = append(out, hunk(s, start, end))
		i = end
	}
	return out
}

func hunk(s []op, start, end int) string {
	oldLine, newLine := 1, 1
	for _, o := range s[:start] {
		if o.kind != '+' {
			oldLine++
		}
		if o.kind != '-' {
			newLine++
		}
	}
	var body strings.Builder
	oldN, newN := 0, 0
	for _, o := range s[start:end] {
		if o.kind != '+' {
			oldN++
		}
		if o.kind != '-' {
			newN++
		}
		body.WriteByte(o.kind)
		body.WriteString(o.line)
		if !strings.HasSuffix(o.line, "\n") {
			body.WriteString("\n\\ No newline at end of file\n")
		}
	}
	return fmt.Sprintf("@@ -%s +%s @@\n%s", span(oldLine, oldN), span(newLine, newN), body.String())
}

// span writes a hunk's range as diff -u does: "l,n", "l" for one line,
// and the line before it for none.
func span(line, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", line-1)
	case 1:
		return fmt.Sprintf("%d", line)
	}
	return fmt.Sprintf("%d,%d", line, n)
}
