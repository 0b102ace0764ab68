package capsule

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMarkdownWorkLostFirst: a loss is the first section of the markdown
// resume, kept when the limit leaves the others out, with its paths quoted
// (a control character in a name is shown escaped, never raw) and the
// command that brings them back.
func TestMarkdownWorkLostFirst(t *testing.T) {
	r := &Resume{Agent: "builder", Focus: strings.Repeat("the goal ", 200),
		WorkLost: []WorkLost{{ID: "wl-0123456789ab", At: time.Now().Add(-time.Minute), Paths: []string{"src/a.go", "evil\x1b[2Jname"}, Snapshot: "0123abcd",
			Restore: "continuityd snapshot restore --lost wl-0123456789ab --agent builder"}}}
	md := r.Markdown(1000)
	first := strings.SplitN(md, "\n## ", 2)[1]
	if !strings.HasPrefix(first, "Work lost\n- 1 min ago: uncommitted changes to `src/a.go`, `\"evil\\033[2Jname\"` ") ||
		!strings.Contains(first, "vanished without a commit; bring them back: `continuityd snapshot restore --lost wl-0123456789ab --agent builder`") {
		t.Fatalf("markdown:\n%s", md)
	}
	if strings.ContainsRune(md, 0x1b) || strings.Contains(md, "## Goal") {
		t.Fatalf("a raw control character, or the goal not left out under the limit:\n%q", md)
	}
}

// TestMarkdownWorkLostNamesWithBackticks: each lost name is one code span
// whose text is the name (as termsafe.Name shows it), whatever backticks
// and spaces it holds, and the command is one more; nothing else of the
// line is code. A name that is not UTF-8 comes in its exact form and is
// shown escaped.
func TestMarkdownWorkLostNamesWithBackticks(t *testing.T) {
	names := []string{"a`b.go", "``x``", "`lead", "trail`", " spaced ", "ok.go", "``` ```", `"\377 bad.txt"`}
	r := &Resume{Agent: "builder", WorkLost: []WorkLost{{ID: "wl-0123456789ab", At: time.Now(), Paths: names, Snapshot: "0123abcd",
		Restore: "continuityd snapshot restore --lost wl-0123456789ab"}}}
	md := r.Markdown(0)
	var line string
	for l := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(l, "- ") && strings.Contains(l, "vanished") {
			line = l
		}
	}
	want := append(slices.Clone(names[:len(names)-1]), `"\377 bad.txt"`, "continuityd snapshot restore --lost wl-0123456789ab")
	if got := codeSpans(line); !slices.Equal(got, want) {
		t.Errorf("code spans of %q:\n%q\nwant\n%q", line, got, want)
	}
}

// codeSpans are the contents of the CommonMark code spans of one line of
// text: a backtick string opens one, the next backtick string of the same
// length closes it (none: the opener is literal text), a backslash escapes
// a backtick outside them, and a content that begins and ends with a space
// (not all spaces) loses one on each side.
func codeSpans(line string) []string {
	var spans []string
	run := func(i int) int {
		j := i
		for j < len(line) && line[j] == '`' {
			j++
		}
		return j - i
	}
	for i := 0; i < len(line); {
		switch {
		case line[i] == '\\' && i+1 < len(line):
			i += 2
		case line[i] == '`':
			n := run(i)
			closed := false
			for j := i + n; j < len(line); {
				if line[j] != '`' {
					j++
					continue
				}
				m := run(j)
				if m == n {
					c := line[i+n : j]
					if len(c) >= 2 && c[0] == ' ' && c[len(c)-1] == ' ' && strings.Trim(c, " ") != "" {
						c = c[1 : len(c)-1]
					}
					spans = append(spans, c)
					i, closed = j+m, true
					break
				}
				j += m
			}
			if !closed {
				i += n
			}
		default:
			i++
		}
	}
	return spans
}

func TestCodeSpan(t *testing.T) {
	for _, s := range []string{"plain", "a`b", "``", "`x`", " a ", "   ", "x``y```z"} {
		if got := codeSpans("text " + CodeSpan(s) + " text"); len(got) != 1 || got[0] != s {
			t.Errorf("CodeSpan(%q) = %s reads back as %q", s, CodeSpan(s), got)
		}
	}
}

// TestMarkdownDoneWorkLost: a result and completed plan steps marked with
// the loss that took their work say so plainly; unmarked ones read as
// before.
func TestMarkdownDoneWorkLost(t *testing.T) {
	now := time.Now()
	r := &Resume{Agent: "builder",
		WorkingState: &WorkingStateRecord{LastResult: "Tax wired into main", UpdatedAt: now, Lost: "wl-0123456789ab"},
		Plan:         []PlanStep{{Step: "wire the tax", Status: PlanCompleted, Lost: "wl-0123456789ab"}, {Step: "test it", Status: PlanPending}},
	}
	md := r.Markdown(0)
	if !strings.Contains(md, "## Done\n**Lost since**: the files of this work vanished without a commit (work lost wl-0123456789ab; "+
		"bring them back: `continuityd snapshot restore --lost wl-0123456789ab`). It was:\nTax wired into main") ||
		!strings.Contains(md, "- [x] wire the tax (**its work was lost since**: work lost wl-0123456789ab)") ||
		!strings.Contains(md, "- [ ] test it\n") {
		t.Fatalf("markdown:\n%s", md)
	}
	r.WorkingState.Lost, r.Plan[0].Lost = "", ""
	if md := r.Markdown(0); strings.Contains(md, "lost") || !strings.Contains(md, "## Done\nTax wired into main") {
		t.Fatalf("unmarked:\n%s", md)
	}
}
