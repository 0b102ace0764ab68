package ui

import (
	"fmt"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// changes is the changes view's data: a snapshot (against its parent or
// another), its files, and the diff file by file.
type changes struct {
	Agent   string
	Detail  *ops.Detail
	Against string
	Split   bool
	Files   []fileDiff
	Cut     bool
	// Prev is the snapshot before this one (its parent), Next the way to
	// the one after it: the arrow keys step to them.
	Prev, Next string
	DiffErr    string
}

// fileDiff is one file's part of a unified diff.
type fileDiff struct {
	Path   string
	Binary bool
	Lines  []diffLine
	Rows   []splitRow // side by side
}

// diffLine is a line of a unified diff: Kind is add, del, ctx, hunk or
// meta; Text is already escaped of control characters and redacted.
type diffLine struct {
	Kind, Text string
}

// splitRow is a row of the side-by-side diff: the old line, the new line.
type splitRow struct {
	Old, New diffLine
	Hunk     string
}

// changesView shows snapshot id: its files (with their line counts) and
// its diff against its parent or ?against=ID, unified or (?layout=split)
// side by side.
func (s *Server) changesView(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("agent"), r.PathValue("id")
	q := r.URL.Query()
	d, err := call(r.Context(), s, ops.SnapshotShow, ops.Args{ID: id, Query: agentQuery(name)})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c := changes{Agent: name, Detail: d, Against: q.Get("against"), Split: q.Get("layout") == "split"}
	dq := agentQuery(name)
	if c.Against != "" {
		dq.Set("against", c.Against)
	}
	diff, err := call(r.Context(), s, ops.SnapshotDiff, ops.Args{ID: d.ID, Query: dq})
	if err != nil {
		c.DiffErr = err.Error()
	} else {
		c.Files, c.Cut = parseDiff(diff, c.Split)
	}
	c.Prev = d.Parent
	c.Next = "newer"
	s.render(w, r, http.StatusOK, "changes", page{Title: "Changes " + shortID(d.ID), Nav: "timeline", Agent: name, Data: c})
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// parseDiff splits a unified diff (git's) into its files. The text is
// redacted of credential shapes once, whole, then each line is escaped of
// control characters.
func parseDiff(d *ops.DiffAnswer, split bool) ([]fileDiff, bool) {
	text := redact(d.Diff)
	var files []fileDiff
	var cur *fileDiff
	for line := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "diff --git "); ok {
			files = append(files, fileDiff{Path: diffPath(rest)})
			cur = &files[len(files)-1]
			continue
		}
		if cur == nil {
			continue
		}
		kind := "ctx"
		switch {
		case strings.HasPrefix(line, "@@"):
			kind = "hunk"
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"), strings.HasPrefix(line, "index "),
			strings.HasPrefix(line, "new file"), strings.HasPrefix(line, "deleted file"), strings.HasPrefix(line, "old mode"),
			strings.HasPrefix(line, "new mode"), strings.HasPrefix(line, "similarity"), strings.HasPrefix(line, "rename "):
			kind = "meta"
		case strings.HasPrefix(line, "Binary files"):
			cur.Binary = true
			kind = "meta"
		case strings.HasPrefix(line, "+"):
			kind = "add"
		case strings.HasPrefix(line, "-"):
			kind = "del"
		case strings.HasPrefix(line, `\`):
			kind = "meta"
		}
		if kind == "meta" && !cur.Binary {
			continue
		}
		cur.Lines = append(cur.Lines, diffLine{Kind: kind, Text: termsafe.Text(line)})
	}
	if split {
		for i := range files {
			files[i].Rows = splitRows(files[i].Lines)
			files[i].Lines = nil
		}
	}
	return files, d.Cut
}

// diffPath is the file a "diff --git a/P b/P" line names (its b side).
func diffPath(rest string) string {
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return termsafe.Name(rest[i+3:])
	}
	return termsafe.Name(rest)
}

// splitRows pairs a hunk's deleted lines with the added lines after them,
// for the side-by-side view; context lines are on both sides.
func splitRows(lines []diffLine) []splitRow {
	var rows []splitRow
	var dels, adds []diffLine
	flush := func() {
		for i := 0; i < max(len(dels), len(adds)); i++ {
			var row splitRow
			if i < len(dels) {
				row.Old = diffLine{Kind: "del", Text: dels[i].Text[1:]}
			}
			if i < len(adds) {
				row.New = diffLine{Kind: "add", Text: adds[i].Text[1:]}
			}
			rows = append(rows, row)
		}
		dels, adds = dels[:0], adds[:0]
	}
	for _, l := range lines {
		switch l.Kind {
		case "del":
			if len(adds) > 0 {
				flush()
			}
			dels = append(dels, l)
		case "add":
			adds = append(adds, l)
		case "hunk":
			flush()
			rows = append(rows, splitRow{Hunk: l.Text})
		default:
			flush()
			t := l.Text
			if len(t) > 0 {
				t = t[1:]
			}
			rows = append(rows, splitRow{Old: diffLine{Kind: "ctx", Text: t}, New: diffLine{Kind: "ctx", Text: t}})
		}
	}
	flush()
	return rows
}

// newerView sends the browser to the snapshot taken after id (the right
// arrow on a snapshot's changes): found in the place's list only when
// asked for, so showing a snapshot does not list them all.
func (s *Server) newerView(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("agent"), r.PathValue("id")
	res, err := call(r.Context(), s, ops.Resume, ops.Args{Query: agentQuery(name, "peek", "1", "local", "1")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := s.snapshotList(r.Context(), name, res.Snapshot)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for i, sn := range list { // newest first
		if sn.ID == id && i > 0 {
			http.Redirect(w, r, "/ui/a/"+url.PathEscape(name)+"/s/"+url.PathEscape(list[i-1].ID), http.StatusSeeOther)
			return
		}
	}
	http.Redirect(w, r, "/ui/a/"+url.PathEscape(name)+"/", http.StatusSeeOther)
}

// diffChunk is how many lines of a diff go in one block of the page: the
// browser lays out the blocks out of view only when they come into view
// (content-visibility), so a 10,000-line diff shows at once.
const diffChunk = 400

// Body is the file's unified diff as HTML: each line escaped here (the
// text is already redacted and free of control characters), in blocks of
// diffChunk lines. Built by hand rather than by the template: the
// template's escaping per line took most of a 10,000-line diff's time.
func (f fileDiff) Body() template.HTML {
	var b strings.Builder
	b.Grow(len(f.Lines) * 64)
	for i, l := range f.Lines {
		if i%diffChunk == 0 {
			if i > 0 {
				b.WriteString("</div>")
			}
			fmt.Fprintf(&b, `<div class="chunk" data-lines="%d">`, min(diffChunk, len(f.Lines)-i))
		}
		b.WriteString(`<span class="`)
		b.WriteString(l.Kind) // one of a few fixed words
		b.WriteString(`">`)
		b.WriteString(html.EscapeString(l.Text))
		b.WriteString("</span>") // each line a block: no newline between them
	}
	if len(f.Lines) > 0 {
		b.WriteString("</div>")
	}
	return template.HTML(b.String())
}
