package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A comment in the code says why the code is as it is. Which issue or
// session asked for it is the history of the work: it belongs in git log
// and CHANGELOG.md, and means nothing to a reader who has neither.

// workRef is a reference to the work's bookkeeping: "issue 24",
// "Issue #12", "session\n// 16", "sessions 13-14".
var workRef = regexp.MustCompile(`(?i)\b(issue|session)s?(\s|//)+#?\d+`)

// historyInComments returns, for one Go source, each comment that cites an
// issue or a session, as "file:line: the reference". Comments on
// consecutive lines are read as one text, so that a reference split over
// two lines is found too.
func historyInComments(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var runs [][]*ast.Comment // comments on consecutive lines
	last := -1
	for _, g := range f.Comments {
		for _, c := range g.List {
			if first := fset.Position(c.Pos()).Line; len(runs) == 0 || first > last+1 {
				runs = append(runs, nil)
			}
			runs[len(runs)-1] = append(runs[len(runs)-1], c)
			last = fset.Position(c.End()).Line
		}
	}
	var found []string
	for _, run := range runs {
		var text strings.Builder
		var starts []int // where each comment of the run starts in text
		for _, c := range run {
			starts = append(starts, text.Len())
			text.WriteString(c.Text)
			text.WriteByte('\n')
		}
		all := text.String()
		for _, m := range workRef.FindAllStringIndex(all, -1) {
			i := sort.SearchInts(starts, m[0]+1) - 1 // the comment the match starts in
			line := fset.Position(run[i].Pos()).Line + strings.Count(all[starts[i]:m[0]], "\n")
			ref := strings.Join(strings.Fields(strings.ReplaceAll(all[m[0]:m[1]], "//", " ")), " ")
			found = append(found, fmt.Sprintf("%s:%d: %q", name, line, ref))
		}
	}
	return found, nil
}

// TestNoHistoryInProductionComments: no comment of the module's production
// code (every .go file but tests and testdata) cites an issue or a session.
func TestNoHistoryInProductionComments(t *testing.T) {
	files := productionFiles(t)
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		found, err := historyInComments(rel, files[rel])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			t.Errorf("%s: say why the code is so, not which issue or session asked for it", f)
		}
	}
}

// The check must be able to fail: references in line and block comments,
// across a line break, with a '#', are found; code, strings and the words
// "issue" and "session" used for what they mean are not.
func TestHistoryInComments(t *testing.T) {
	src := `package p

// Bounds on sessions (issue 12).
const x = "issue 7" // a string is not a comment

/* Whose work (Issue #24, attribution). */
var y = 1 // every other burst at 2 s (docs/PERFORMANCE.md, session
// 16).

// at most 256 sessions; the issue at hand; 2 sessions
func z() {}
`
	got, err := historyInComments("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`p.go:3: "issue 12"`,
		`p.go:6: "Issue #24"`,
		`p.go:7: "session 16"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("historyInComments found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
