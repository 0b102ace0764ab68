package layout

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The documents link to each other by relative paths and #anchors. A
// section renamed or moved to another file breaks every link to it without
// a word on GitHub; the tests below find such a link before a reader does.

// markdownFiles lists the documents whose links are checked: the Markdown
// files at the module's root (README.md, CHANGELOG.md) and under docs/,
// relative to the root with forward slashes.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	top, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range top {
		files = append(files, filepath.Base(f))
	}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "README.md") {
		t.Fatal("no README.md at the module's root")
	}
	return files
}

var (
	// mdLink is an inline link or image: [text](target) or
	// [text](target "title").
	mdLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpan is an inline code span, whose text is not Markdown.
	codeSpan  = regexp.MustCompile("`[^`\n]*`")
	atxHead   = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	headLink  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// outsideFences returns the lines of text, those of fenced code blocks
// (and their fences) made empty: line n of the text is at index n-1.
func outsideFences(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

// slug is GitHub's anchor for a heading's text: the text as rendered
// (code spans, emphasis and links reduced to their words), lower-cased,
// every character but letters, digits, marks, '_', '-' and spaces dropped,
// each space made a '-'.
func slug(heading string) string {
	heading = headLink.ReplaceAllString(heading, "$1")
	heading = strings.NewReplacer("`", "", "*", "").Replace(heading)
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a document's headings, as GitHub makes
// them: a heading whose slug an earlier one took gets "-1", "-2", ….
func anchors(text string) map[string]bool {
	got := map[string]bool{}
	seen := map[string]int{}
	for _, l := range outsideFences(text) {
		m := atxHead.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		a := s
		if n := seen[s]; n > 0 {
			a = fmt.Sprintf("%s-%d", s, n)
		}
		seen[s]++
		got[a] = true
	}
	return got
}

// brokenLinks checks every relative link of the document at rel (a path
// from the module's root) and returns what is wrong with each broken one.
// read reads a document by its path from the root; exists says whether a
// path from the root is there.
func brokenLinks(rel, text string, read func(string) (string, error), exists func(string) bool) []string {
	var broken []string
	for i, l := range outsideFences(text) {
		l = codeSpan.ReplaceAllString(l, "")
		for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
			target := m[1]
			if urlScheme.MatchString(target) {
				continue // another site: not ours to check
			}
			where := fmt.Sprintf("%s:%d: (%s)", rel, i+1, target)
			file, anchor, _ := strings.Cut(target, "#")
			switch {
			case strings.HasPrefix(file, "/"):
				broken = append(broken, where+" is absolute: link relative to the document")
				continue
			case file == "":
				file = rel
			default:
				file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), file)))
				if file == ".." || strings.HasPrefix(file, "../") {
					broken = append(broken, where+" leads out of the repository")
					continue
				}
				if !exists(file) {
					broken = append(broken, where+": no such file")
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				broken = append(broken, where+": an anchor into a file that is not Markdown")
				continue
			}
			doc, err := read(file)
			if err != nil {
				broken = append(broken, where+": "+err.Error())
				continue
			}
			if !anchors(doc)[anchor] {
				broken = append(broken, fmt.Sprintf("%s: %s has no heading with the anchor #%s", where, file, anchor))
			}
		}
	}
	return broken
}

// TestDocLinks: every relative link of README.md, CHANGELOG.md and docs/
// leads to a file that exists and, with an #anchor, to a heading of it.
func TestDocLinks(t *testing.T) {
	read := func(rel string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		return string(b), err
	}
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
		return err == nil
	}
	for _, rel := range markdownFiles(t) {
		text, err := read(rel)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range brokenLinks(rel, text, read, exists) {
			t.Error(b)
		}
	}
}

// The link checker must be able to fail: a missing file, a missing anchor,
// an absolute path and a way out of the repository are caught, and links
// in code are not read.
func TestBrokenLinks(t *testing.T) {
	docs := map[string]string{
		"README.md": "# Title\n\n## A `code` heading: with *words*\n\n## Same\n\n## Same\n\n" +
			"[ok](docs/API.md#errors) [ok](#a-code-heading-with-words) [ok](#same-1) [ok](docs/) [ok](https://example.com/x#y)\n" +
			"[bad](docs/NONE.md) [bad](docs/API.md#none) [bad](#same-2) [bad](/docs/API.md) [bad](../x.md)\n" +
			"`[code](docs/NONE.md)`\n```\n[fenced](docs/NONE.md)\n```\n",
		"docs/API.md": "# API\n\n## Errors\n\n[ok](../README.md#title) [bad](README.md)\n",
	}
	read := func(rel string) (string, error) {
		if d, ok := docs[rel]; ok {
			return d, nil
		}
		return "", os.ErrNotExist
	}
	exists := func(rel string) bool { _, ok := docs[rel]; return ok || rel == "docs" }
	var got []string
	for _, rel := range []string{"README.md", "docs/API.md"} {
		got = append(got, brokenLinks(rel, docs[rel], read, exists)...)
	}
	want := []string{
		"README.md:10: (docs/NONE.md): no such file",
		"README.md:10: (docs/API.md#none): docs/API.md has no heading with the anchor #none",
		"README.md:10: (#same-2): README.md has no heading with the anchor #same-2",
		"README.md:10: (/docs/API.md) is absolute: link relative to the document",
		"README.md:10: (../x.md) leads out of the repository",
		"docs/API.md:5: (README.md): no such file",
	}
	if !slices.Equal(got, want) {
		t.Errorf("brokenLinks found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for heading, want := range map[string]string{
		"Fleet: resume anywhere on NATS JetStream":      "fleet-resume-anywhere-on-nats-jetstream",
		"Delx: each agent's own identity":               "delx-each-agents-own-identity",
		"Use with Claude Code, Codex or any MCP client": "use-with-claude-code-codex-or-any-mcp-client",
		"`max_file_size` and [the store](x.md) — 2× µs": "max_file_size-and-the-store--2-µs",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestDocLengths: the README stays a front door and PERFORMANCE.md a page
// of current figures; the manual, the raw runs and the history have
// places of their own (docs/, docs/perf/, CHANGELOG.md).
func TestDocLengths(t *testing.T) {
	for _, c := range []struct {
		path string
		max  int
	}{{"README.md", 250}, {"docs/PERFORMANCE.md", 400}} {
		n := strings.Count(readDoc(t, c.path).text, "\n")
		if n > c.max {
			t.Errorf("%s is %d lines, over its %d: move what is not for its readers to the page that is", c.path, n, c.max)
		}
	}
}
