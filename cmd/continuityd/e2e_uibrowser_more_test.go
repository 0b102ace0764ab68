//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// acceptDialogs accepts every confirmation the page asks for in the
// browser of ctx, and sends its text on the channel it returns (room for
// a few: a test asks one at a time). It ends with ctx.
func acceptDialogs(t *testing.T, ctx context.Context) <-chan string {
	t.Helper()
	asked := make(chan string, 4)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			select {
			case asked <- ev.Message:
			default:
			}
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return
			}
		}
	}()
	return asked
}

// TestUIInTheBrowserTimelineTurnsHistoryLost drives the page's other
// views in a real headless chromium against a real daemon fed by real
// hook payloads: an agent's turn (UserPromptSubmit, a Write's
// PostToolUse, Stop) with a person's edit inside it, a checkpoint with a
// decision, a compaction, and a second session. The timeline shows the
// snapshots with the checkpoint, the decision, the compaction, the
// sessions and the turn between them, and the session filter keeps one
// session; the turn's changes list each file with whose change it is;
// the file's history is the version journal's, and a version restored
// through it (history_restore) is back on disk; the work-lost view's
// button, confirmed, brings a removed file back on disk.
func TestUIInTheBrowserTimelineTurnsHistoryLost(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	w, work := turnsWorkspace(t)
	writeFile(t, work, "scratch.md", "ideas kept nowhere else\n") // never committed
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	env := []string{"CONTINUITYD_SOCKET=" + w.socket}
	hook := turnHook(t, env, work)
	waitSnapshot(t, c, "start")

	// A session (the hook's, abc123), a checkpoint with a decision, and
	// another session's start; the compaction comes after the turn (its
	// pre_compaction snapshot, taken when the daemon gets to it, must not
	// take the turn's first change before turn_start does).
	payload := hookPayload(t, "input-sessionstart-startup.json", func(m map[string]any) { m["cwd"] = work; delete(m, "transcript_path") })
	if code, _, errs := cli(t, env, payload, "hook", "--agent", "builder"); code != 0 { // it answers the resume
		t.Fatalf("hook SessionStart: exit %d: %s", code, errs)
	}
	signal := func(sig map[string]any) {
		t.Helper()
		if code, m, err := post(c, "/v1/signals", sig); err != nil || code != 200 {
			t.Fatalf("signal %v: %d %v %v", sig, code, m, err)
		}
	}
	signal(map[string]any{"kind": "session", "event": "start", "source": "startup", "session_id": "zz-other-session"})
	if code, m, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "wire the tax in",
		"decide": map[string]any{"chosen": "a flat tax", "because": "the brackets are not decided yet by anyone"}}); err != nil || code != 200 {
		t.Fatalf("checkpoint: %d %v %v", code, m, err)
	}

	// The turn: the agent writes main.go twice (two versions in the
	// journal), a person writes notes.md while no tool runs.
	writeFile(t, work, "before.md", "written before the prompt\n")
	waitUntil(t, func() string { return "the daemon to see before.md" },
		func() bool { return slices.Contains(byOthers(t, c, "builder"), "before.md outside") })
	hook("input-userpromptsubmit.json", nil)
	start := waitSnapshot(t, c, "turn_start")
	history := func() []any { return asList(get(t, c, "/v1/history?path=main.go")["versions"]) }
	first := "package main\n\nfunc tax() int { return 7 }\n\nfunc main() {}\n"
	for i, content := range []string{first, strings.Replace(first, "{}", "{ println(tax()) }", 1)} {
		writeFile(t, work, "main.go", content)
		hook("input-posttooluse-write.json", func(m map[string]any) {
			m["tool_input"].(map[string]any)["file_path"] = filepath.Join(work, "main.go")
		})
		waitUntil(t, func() string { return fmt.Sprintf("version %d of main.go in the journal: %v", i+1, history()) },
			func() bool { return len(history()) > i })
	}
	writeFile(t, work, "notes.md", "by hand, during the turn\n")
	waitUntil(t, func() string { return "the daemon to see notes.md" },
		func() bool { return slices.Contains(byOthers(t, c, "builder"), "notes.md outside") })
	hook("input-stop.json", nil)
	end := waitSnapshot(t, c, "turn_end")
	signal(map[string]any{"kind": "compaction", "phase": "pre", "trigger": "auto", "session_id": "abc123"})

	ctx := browser(t, 1200, 900)
	login := uiLoginURL(t, w.socket, nil)
	base := login[:strings.Index(login, "/ui/")]
	run(t, ctx, "open the login URL", chromedp.Navigate(login), chromedp.WaitVisible(`li.place[data-place="builder"]`))

	// The timeline: snapshots and what happened between them.
	run(t, ctx, "the timeline", chromedp.Navigate(base+"/ui/a/builder/"), chromedp.WaitVisible(`#snapshots`))
	for _, sel := range []string{"tr.ev.kind-checkpoint", "tr.ev.kind-decision", "tr.ev.kind-compaction", "tr.ev.kind-session",
		"tr.ev.kind-turn", "tr.snap.trigger-turn_start", "tr.snap.trigger-turn_end", "a.turn", "#since-message"} {
		if count(t, ctx, sel) == 0 {
			t.Errorf("the timeline has no %s; it shows:\n%s", sel, value(t, ctx, "the timeline", chromedp.Text(`#snapshots`)))
		}
	}
	all := value(t, ctx, "the timeline", chromedp.Text(`#snapshots`))
	if !strings.Contains(all, "zz-other-ses") || !strings.Contains(all, "a flat tax") {
		t.Errorf("the timeline lacks the other session's start or the decision:\n%s", all)
	}
	shoot(t, ctx, "timeline-events")

	// One session: the other session's lines go, the turn stays.
	run(t, ctx, "filter by session abc123", chromedp.SetValue(`select[name="session"]`, "abc123"),
		chromedp.Submit(`form.filter`), chromedp.WaitVisible(`#snapshots`))
	one := value(t, ctx, "the filtered timeline", chromedp.Text(`#snapshots`))
	if strings.Contains(one, "zz-other-ses") || !strings.Contains(one, "turn_end") || count(t, ctx, "tr.ev.kind-compaction") == 0 {
		t.Errorf("the timeline of session abc123:\n%s", one)
	}

	// The turn's changes: each file with whose change it is.
	run(t, ctx, "the turn's changes", chromedp.Navigate(base+"/ui/a/builder/"), chromedp.WaitVisible(`a.turn`),
		chromedp.Click(`a.turn`), chromedp.WaitVisible(`pre.diff`))
	if href := value(t, ctx, "the address", chromedp.Evaluate[string](`location.href`)); !strings.Contains(href, "/s/"+end.ID+"?against="+start.ID) {
		t.Errorf("the turn's link opened %s, want turn_end %s against turn_start %s", href, end.ID, start.ID)
	}
	tree := value(t, ctx, "the files", chromedp.Text(`ul.tree`))
	if !lineWith(tree, "main.go", "by", "agent") || !lineWith(tree, "notes.md", "by", "outside") || strings.Contains(tree, "before.md") {
		t.Errorf("the turn's files:\n%s", tree)
	}
	shoot(t, ctx, "turn-changes")

	// The file's history, from the journal; its first version restored.
	vs := history()
	v1, _ := vs[0].(map[string]any)["id"].(string) // oldest first
	run(t, ctx, "main.go's history", chromedp.Navigate(base+"/ui/a/builder/file?path=main.go"), chromedp.WaitVisible(`table.versions`))
	shown := value(t, ctx, "the history", chromedp.Text(`main`))
	if !strings.Contains(shown, "in the version journal") || !strings.Contains(shown, "agent") || !strings.Contains(shown, v1) {
		t.Errorf("the history of main.go:\n%s", shown)
	}
	shoot(t, ctx, "history-journal")
	run(t, ctx, "restore "+v1+" (dry run)", chromedp.Click(fmt.Sprintf(`a.button[href*="version=%s&"]`, v1)), chromedp.WaitVisible(`#confirm`))
	if b, _ := os.ReadFile(filepath.Join(work, "main.go")); string(b) == first {
		t.Fatal("the dry run restored main.go")
	}
	run(t, ctx, "confirm", chromedp.Click(`#confirm`), chromedp.WaitVisible(`#restored`))
	if b, _ := os.ReadFile(filepath.Join(work, "main.go")); string(b) != first {
		t.Errorf("after restoring %s through the page main.go is %q, want %q", v1, b, first)
	}
	if undo := value(t, ctx, "the undo command", chromedp.Text(`#undo`)); !strings.Contains(undo, "--path main.go") {
		t.Errorf("the undo command: %q", undo)
	}

	// Work lost: scratch.md, in the snapshots, never committed, removed.
	if err := os.Remove(filepath.Join(work, "scratch.md")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli(t, env, "", "snapshot", "take"); code != 0 {
		t.Fatalf("snapshot take (exit %d): %s%s", code, out, errOut)
	}
	waitUntil(t, func() string { return "work_lost to list scratch.md" }, func() bool {
		return strings.Contains(fmt.Sprint(get(t, c, "/v1/continuity?peek=1&local=1")["work_lost"]), "scratch.md")
	})
	asked := acceptDialogs(t, ctx)
	run(t, ctx, "work lost", chromedp.Navigate(base+"/ui/a/builder/lost"), chromedp.WaitVisible(`section.lost`))
	shoot(t, ctx, "lost-button")
	run(t, ctx, "bring it back", chromedp.Click(`section.lost button`), chromedp.WaitVisible(`#restored`))
	if q := <-asked; !strings.HasPrefix(q, "Bring back") {
		t.Errorf("the confirmation asked %q", q)
	}
	if b, err := os.ReadFile(filepath.Join(work, "scratch.md")); err != nil || string(b) != "ideas kept nowhere else\n" {
		t.Errorf("scratch.md after the page's restore: %q %v", b, err)
	}
	shoot(t, ctx, "lost-button-restored")
}

// TestUIInTheBrowserLongDiff opens a snapshot that added a 10,000-line
// file in a real headless chromium: the changes view itself carries only
// the diff's first lines (its HTML holds at most a few hundred), and once
// the page says the diff is shown the block of the whole file is as tall
// as its 10,000 lines (the scroll bar is right at once); then every line
// ends up in the page, once each and in order, the ones past the first
// screens fetched by the page's script, a credential on one of those
// redacted and a control character escaped as in the rest of the view.
// It asserts what is shown, not how fast: the figure is
// BenchmarkUIDiff10k's.
func TestUIInTheBrowserLongDiff(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const n = 10000
	w, work := snapshotWorkspace(t, "")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	defer c.CloseIdleConnections()
	waitUntil(t, func() string { return "no start snapshot" }, func() bool { return len(asList(get(t, c, "/v1/snapshots")["snapshots"])) > 0 })
	var big strings.Builder
	for i := range n {
		switch i {
		case 7000:
			fmt.Fprintf(&big, "line %05d key AKIAIOSFODNN7EXAMPLQ\n", i)
		case 8000:
			fmt.Fprintf(&big, "line %05d bell\a escape\x1b[2J\n", i)
		default:
			fmt.Fprintf(&big, "line %05d of a file the agent wrote whole\n", i)
		}
	}
	writeFile(t, work, "big.txt", big.String())
	writeFile(t, work, "small.txt", "after the big one\n")
	if code, m, err := post(c, "/v1/snapshots", map[string]any{"message": "the big file"}); err != nil || code != 200 {
		t.Fatalf("snapshot take: %d %v %v", code, m, err)
	}

	ctx := browser(t, 1200, 760)
	login := uiLoginURL(t, w.socket, nil)
	base := login[:strings.Index(login, "/ui/")]
	run(t, ctx, "open the login URL", chromedp.Navigate(login), chromedp.WaitVisible(`li.place[data-place="builder"]`))
	run(t, ctx, "the long diff", chromedp.Navigate(base+"/ui/a/builder/s/latest"), chromedp.WaitVisible(`[data-diff="shown"]`))

	// What the view's own HTML carries (asked again, same session).
	inHTML := value(t, ctx, "the view's HTML", chromedp.Evaluate[int](`(function () {
		var x = new XMLHttpRequest(); x.open("GET", location.href, false); x.send();
		return x.responseText.split('<span class="add">').length - 1; })()`))
	if inHTML > 400 {
		t.Errorf("the view's HTML carries %d lines of the diff; the rest should come after it is shown", inHTML)
	}
	// Shown: the big file's block is as tall as its lines already.
	tall := value(t, ctx, "the big file's height in lines", chromedp.Evaluate[float64](`(function () {
		var pre = document.querySelector('section.file[id="f-big.txt"] pre.diff');
		return pre.getBoundingClientRect().height / pre.querySelector("span.add").getBoundingClientRect().height; })()`))
	if tall < n {
		t.Errorf("when shown, the big file's diff is %.0f lines tall, want at least %d", tall, n)
	}
	adds := func() int { return count(t, ctx, `section.file[id="f-big.txt"] pre.diff span.add`) }
	waitUntil(t, func() string { return fmt.Sprintf("the page holds %d of the %d lines", adds(), n) }, func() bool { return adds() >= n })
	bad := value(t, ctx, "the lines in order", chromedp.Evaluate[string](fmt.Sprintf(`(function () {
		var l = document.querySelectorAll('section.file[id="f-big.txt"] pre.diff span.add');
		if (l.length !== %d) { return "lines: " + l.length; }
		for (var i = 0; i < l.length; i++) {
			var want = "+line " + String(i).padStart(5, "0");
			if (l[i].textContent.indexOf(want) !== 0) { return "line " + i + ": " + l[i].textContent; }
		}
		return ""; })()`, n)))
	if bad != "" {
		t.Errorf("the big file's lines are not whole and in order: %s", bad)
	}
	text := value(t, ctx, "the page's text", chromedp.Evaluate[string](`document.body.textContent`))
	if strings.Contains(text, "AKIAIOSFODNN7EXAMPLQ") || strings.ContainsAny(text, "\a\x1b") {
		t.Errorf("a held-back line shows a credential or a raw control character")
	}
	if i := strings.Index(text, "line 08000"); i < 0 || !strings.Contains(text[i:min(i+60, len(text))], "bell") {
		t.Errorf("line 8000 shows as %q", text[max(i, 0):min(max(i, 0)+60, len(text))])
	}
	// The small file after the big one: all of it held back (the first
	// lines went to the big one), fetched and put in too.
	small := func() string {
		return value(t, ctx, "the small file", chromedp.Evaluate[string](`document.querySelector('section.file[id="f-small.txt"]').textContent`))
	}
	waitUntil(t, func() string { return fmt.Sprintf("the small file after the big one shows %q", small()) },
		func() bool { return strings.Contains(small(), "+after the big one") })
	run(t, ctx, "the end of the diff", chromedp.ScrollIntoView(`section.file[id="f-small.txt"]`))
	shoot(t, ctx, "changes-long")
}
