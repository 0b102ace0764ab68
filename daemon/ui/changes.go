package ui

import (
	"context"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	// Tree is the file list: the snapshot's files against its parent, or
	// (against another snapshot, a turn) the files of the diff; each with
	// whose change it is.
	Tree []treeFile
}

// treeFile is one file of the changes view's list.
type treeFile struct {
	Path           string
	Status         string
	Added, Deleted int
	Binary         bool
	By             string // whose change: agent, agent:NAME, outside; "" unknown
}

// fileDiff is one file's part of a unified diff.
type fileDiff struct {
	Path   string
	Binary bool
	Lines  []diffLine
	Rows   []splitRow // side by side
	// Added and Deleted count its lines; Status is added, deleted or
	// modified.
	Added, Deleted int
	Status         string
	// raw is the path as git's diff line names it (its b side, unquoted),
	// "" when git quoted it: the rest of the file is then asked for by
	// the file's place in the whole diff.
	raw string
	// Rest is how many of Lines the page leaves out at first, and Src
	// where its script fetches them from once the page is shown.
	Rest int
	Src  string
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
	// The snapshot and its diff are asked for together: each is a git
	// run over the store.
	dq := agentQuery(name)
	if a := q.Get("against"); a != "" {
		dq.Set("against", a)
	}
	var diff *ops.DiffAnswer
	var diffErr error
	var wg sync.WaitGroup
	wg.Go(func() { diff, diffErr = call(r.Context(), s, ops.SnapshotDiff, ops.Args{ID: id, Query: dq}) })
	d, err := call(r.Context(), s, ops.SnapshotShow, ops.Args{ID: id, Query: agentQuery(name)})
	wg.Wait()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c := changes{Agent: name, Detail: d, Against: q.Get("against"), Split: q.Get("layout") == "split"}
	if diffErr == nil && diff.ID != d.ID { // "latest" moved between the two: the diff of the one shown
		diff, diffErr = call(r.Context(), s, ops.SnapshotDiff, ops.Args{ID: d.ID, Query: dq})
	}
	err = diffErr
	if err != nil {
		c.DiffErr = err.Error()
	} else {
		c.Files, c.Cut = parseDiff(diff, c.Split)
		if !c.Split {
			s.rests.put(r.Context(), name, d.ID, c.Against, c.Files)
			holdBack(c.Files, func(i int, f fileDiff) string {
				v := url.Values{"file": {strconv.Itoa(i)}, "from": {strconv.Itoa(len(f.Lines))}, "lines": {strconv.Itoa(f.Rest)}}
				if c.Against != "" {
					v.Set("against", c.Against)
				}
				if f.raw != "" {
					v.Set("path", f.raw)
				}
				return "/ui/a/" + url.PathEscape(name) + "/s/" + url.PathEscape(d.ID) + "/diff?" + v.Encode()
			})
		}
	}
	c.Tree = s.treeOf(r.Context(), name, d, c)
	c.Prev = d.Parent
	c.Next = "newer"
	s.render(w, r, http.StatusOK, "changes", page{Title: "Changes " + shortID(d.ID), Nav: "timeline", Agent: name, Data: c})
}

// maxByWalk bounds how many snapshots the changes view looks into, from
// the one shown back to the one it is compared with, to say whose each
// file's change is.
const maxByWalk = 50

// treeOf is the changes view's file list: against its parent, the
// snapshot's own files with their `by`; against another snapshot (a
// turn), the diff's files, each with the `by` of every snapshot between
// the two that changed it (when the other one is an ancestor within
// maxByWalk snapshots).
func (s *Server) treeOf(ctx context.Context, agent string, d *ops.Detail, c changes) []treeFile {
	if c.Against == "" || c.Against == d.Parent {
		out := make([]treeFile, len(d.Files))
		for i, f := range d.Files {
			out[i] = treeFile{Path: f.Path, Status: f.Status, Added: f.LinesAdded, Deleted: f.LinesDeleted, Binary: f.Binary, By: f.By}
		}
		return out
	}
	by := map[string][]string{}
	cur := d
	for range maxByWalk {
		for _, f := range cur.Files {
			if f.By != "" && !slices.Contains(by[f.Path], f.By) {
				by[f.Path] = append(by[f.Path], f.By)
			}
		}
		if cur.Parent == "" || strings.HasPrefix(cur.Parent, c.Against) || strings.HasPrefix(c.Against, cur.Parent) {
			break
		}
		next, err := call(ctx, s, ops.SnapshotShow, ops.Args{ID: cur.Parent, Query: agentQuery(agent)})
		if err != nil {
			break
		}
		cur = next
	}
	out := make([]treeFile, 0, len(c.Files))
	for _, f := range c.Files {
		raw := f.raw
		if raw == "" {
			raw = f.Path
		}
		out = append(out, treeFile{Path: raw, Status: f.Status, Added: f.Added, Deleted: f.Deleted, Binary: f.Binary, By: strings.Join(by[raw], ", ")})
	}
	return out
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
			files = append(files, fileDiff{Path: diffPath(rest), raw: rawPath(rest), Status: ops.StatusModified})
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
		case strings.HasPrefix(line, "new file"):
			cur.Status, kind = ops.StatusAdded, "meta"
		case strings.HasPrefix(line, "deleted file"):
			cur.Status, kind = ops.StatusDeleted, "meta"
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"), strings.HasPrefix(line, "index "),
			strings.HasPrefix(line, "new file"), strings.HasPrefix(line, "deleted file"), strings.HasPrefix(line, "old mode"),
			strings.HasPrefix(line, "new mode"), strings.HasPrefix(line, "similarity"), strings.HasPrefix(line, "rename "):
			kind = "meta"
		case strings.HasPrefix(line, "Binary files"):
			cur.Binary = true
			kind = "meta"
		case strings.HasPrefix(line, "+"):
			kind = "add"
			cur.Added++
		case strings.HasPrefix(line, "-"):
			kind = "del"
			cur.Deleted++
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

// rawPath is the file a "diff --git a/P b/P" line names, as it is, or ""
// when git quoted it (a name with unusual bytes).
func rawPath(rest string) string {
	if strings.HasPrefix(rest, `"`) {
		return ""
	}
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[i+3:]
	}
	return ""
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
// (content-visibility).
const diffChunk = 400

// firstLines is how many lines of the unified diff the changes view
// itself carries, over all its files: the first screens. The rest of each
// file comes after the page is shown (diffRest, one request per file), so
// a 10,000-line diff paints as fast as a short one and the browser never
// parses one megabyte of HTML before it shows anything.
const firstLines = 300

// holdBack leaves in each file only what the view carries at first
// (firstLines over all files), and says where the rest of each comes
// from.
func holdBack(files []fileDiff, restURL func(i int, f fileDiff) string) {
	budget := firstLines
	for i := range files {
		f := &files[i]
		keep := min(len(f.Lines), budget)
		budget -= keep
		if keep < len(f.Lines) {
			f.Rest = len(f.Lines) - keep
			f.Lines = f.Lines[:keep]
			f.Src = restURL(i, *f)
		}
	}
}

// Body is the file's unified diff as HTML: each line escaped here (the
// text is already redacted and free of control characters), in blocks of
// diffChunk lines. Built by hand rather than by the template: the
// template's escaping per line took most of a 10,000-line diff's time.
func (f fileDiff) Body() template.HTML { return linesHTML(f.Lines, true) }

// linesHTML is lines as HTML, in blocks of diffChunk lines when blocks.
func linesHTML(lines []diffLine, blocks bool) template.HTML {
	var b strings.Builder
	b.Grow(len(lines) * 64)
	for i, l := range lines {
		if blocks && i%diffChunk == 0 {
			if i > 0 {
				b.WriteString("</div>")
			}
			fmt.Fprintf(&b, `<div class="chunk" data-lines="%d">`, min(diffChunk, len(lines)-i))
		}
		b.WriteString(`<span class="`)
		b.WriteString(l.Kind) // one of a few fixed words
		b.WriteString(`">`)
		b.WriteString(html.EscapeString(l.Text))
		b.WriteString("</span>") // each line a block: no newline between them
	}
	if blocks && len(lines) > 0 {
		b.WriteString("</div>")
	}
	return template.HTML(b.String())
}
