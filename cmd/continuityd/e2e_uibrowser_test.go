//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// shotsEnv names a directory where TestUIInTheBrowser also writes its
// screenshots (docs/ui, to refresh the ones the README shows); they
// always go to the test's artifact directory.
const shotsEnv = "CONTINUITYD_UI_SHOTS"

// chromium is the headless browser the page's tests drive: Debian's
// chromium, which .ci/run installs. Without it the tests are skipped,
// except in CI (CI set), where its absence fails them.
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH, and CI is set: .ci/run installs Debian's chromium (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: install Debian's chromium (apt-get install chromium) to run the web page's browser tests")
	return ""
}

// browser starts a headless chromium for the test, its window w×h.
func browser(t testing.TB, w, h int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.WindowSize(w, h),
		chromedp.Flag("headless", "new"), chromedp.Flag("hide-scrollbars", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // the browser starts
		t.Fatalf("starting %s: %v", chromium(t), err)
	}
	return ctx
}

// shoot saves a screenshot of what the browser shows as NAME.png in the
// test's artifact directory (and in $CONTINUITYD_UI_SHOTS).
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv(shotsEnv); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs browser actions, failing the test with what was asked.
func run(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	step, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(step, actions...); err != nil {
		look, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		shown, _ := chromedp.Run(look, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		t.Fatalf("%s: %v; the browser shows %s", what, err, shown)
	}
}

// stepTimeout bounds one step in the browser: generous, for a loaded
// machine; a step that never ends fails with what the browser shows.
const stepTimeout = 60 * time.Second

// value runs one browser action that answers a value.
func value[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	step, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(step, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// count is how many elements the page has that match sel.
func count(t testing.TB, ctx context.Context, sel string) int {
	t.Helper()
	return value(t, ctx, "count "+sel, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
}

// TestUIInTheBrowser drives the page in a real headless chromium, one
// daemon and one browser for every view: the one-time URL opens the
// places; a file changed in the workdir shows as a new snapshot on the
// open timeline without a reload (the live stream); its changes and diff
// open; the file's history lists its versions; a version restored through
// the page (dry run, then confirm) is back on disk. Each view is
// screenshot.
func TestUIInTheBrowser(t *testing.T) {
	w, work := snapshotWorkspace(t, "")
	file := filepath.Join(work, "src", "parser.go")
	os.MkdirAll(filepath.Dir(file), 0o755)
	v1 := "package src\n\n// Parse reads one line.\nfunc Parse(s string) string { return s }\n"
	if err := os.WriteFile(file, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(work, "notes.txt"), []byte("ideas kept nowhere else\n"), 0o644)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	c := p.client()
	snapshots := func() int {
		s, _ := get(t, c, "/v1/snapshots")["snapshots"].([]any)
		return len(s)
	}
	waitUntil(t, func() string { return "no start snapshot" }, func() bool { return snapshots() > 0 })
	for _, f := range []float64{0.12, 0.31, 0.47, 0.62} {
		if code, _, err := post(c, "/v1/signals", map[string]any{"kind": "context", "used_fraction": f}); err != nil || code != 200 {
			t.Fatalf("context signal: %d %v", code, err)
		}
	}
	post(c, "/v1/signals", map[string]any{"kind": "compaction", "phase": "pre", "trigger": "auto"})
	post(c, "/v1/signals", map[string]any{"kind": "context", "used_fraction": 0.18})
	post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "make the parser take quoted fields",
		"working_state": map[string]any{"next_action": "handle escaped quotes"}, "commitments": map[string]any{"open": []any{map[string]any{"title": "ship the parser fix"}}}})

	ctx := browser(t, 1200, 760)
	login := uiLoginURL(t, w.socket, nil)
	base := login[:strings.Index(login, "/ui/")]

	// The one-time URL: the places.
	run(t, ctx, "open the login URL", chromedp.Navigate(login), chromedp.WaitVisible(`li.place[data-place="builder"]`))
	focus := value(t, ctx, "the focus", chromedp.Text(`li.place dd`))
	if !strings.Contains(focus, "quoted fields") {
		t.Errorf("the places show the focus %q", focus)
	}
	shoot(t, ctx, "places")

	// The timeline, open while the workdir changes: the new snapshot
	// comes in over the live stream, without a reload.
	run(t, ctx, "the timeline", chromedp.Navigate(base+"/ui/a/builder/"), chromedp.WaitVisible(`#snapshots`), chromedp.WaitVisible(`#live.on`))
	value(t, ctx, "mark the document", chromedp.Evaluate[string](`window.notReloaded = "yes"`))
	before := count(t, ctx, "#snapshots tr.snap")
	v2 := strings.Replace(v1, "return s }", "return strings.Trim(s, `\"`) }", 1)
	if err := os.WriteFile(file, []byte(v2), 0o644); err != nil {
		t.Fatal(err)
	}
	inAPI := snapshots() // the start snapshot
	waitUntil(t, func() string { return "no snapshot of the change in the API" }, func() bool { return snapshots() > inAPI })
	seen := time.Now()
	waitUntil(t, func() string { return fmt.Sprintf("the open timeline still shows %d snapshots", before) }, func() bool {
		return count(t, ctx, "#snapshots tr.snap") > before
	})
	t.Logf("the new snapshot showed on the open page %v after the API listed it", time.Since(seen).Round(time.Millisecond))
	marker := value(t, ctx, "still the same document", chromedp.Evaluate[string](`window.notReloaded || "reloaded"`))
	if marker != "yes" {
		t.Errorf("the page was reloaded to show the snapshot (%q)", marker)
	}
	shoot(t, ctx, "timeline")

	// Its changes and diff: the newest snapshot, opened with the keyboard.
	run(t, ctx, "open the newest snapshot", chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"), chromedp.WaitVisible(`pre.diff`))
	diff := value(t, ctx, "the diff", chromedp.Text(`pre.diff`))
	if !strings.Contains(diff, "+func Parse(s string) string { return strings.Trim") || !strings.Contains(diff, "-func Parse(s string) string { return s }") {
		t.Errorf("the diff shown:\n%s", diff)
	}
	shoot(t, ctx, "changes")
	run(t, ctx, "side by side", chromedp.Click(`#split`), chromedp.WaitVisible(`table.diff.split`))
	shoot(t, ctx, "changes-split")

	// The file's history, and one version restored through the page.
	run(t, ctx, "the file's history", chromedp.Click(`ul.tree a.history`), chromedp.WaitVisible(`table.versions`))
	if n := count(t, ctx, "table.versions tbody tr"); n < 2 {
		t.Fatalf("the history lists %d versions of src/parser.go, want the start's and the change's", n)
	}
	shoot(t, ctx, "history")
	run(t, ctx, "restore the first version (dry run)", chromedp.Click(`table.versions tbody tr:last-child a.button`), chromedp.WaitVisible(`#confirm`))
	if b, _ := os.ReadFile(file); string(b) != v2 {
		t.Fatalf("the dry run changed the file: %q", b)
	}
	shoot(t, ctx, "restore-dry-run")
	run(t, ctx, "confirm the restore", chromedp.Click(`#confirm`), chromedp.WaitVisible(`#restored`))
	if b, _ := os.ReadFile(file); string(b) != v1 {
		t.Fatalf("after the restore through the page the file is %q, want its first version", b)
	}
	undo := value(t, ctx, "the undo command", chromedp.Text(`#undo`))
	if !strings.HasPrefix(undo, "continuityd snapshot restore ") || !strings.Contains(undo, "--path src/parser.go") {
		t.Errorf("the undo command shown: %q", undo)
	}
	shoot(t, ctx, "restored")

	// Work lost: a file no commit held, removed.
	if err := os.Remove(filepath.Join(work, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() string { return "no work_lost after notes.txt was removed" }, func() bool {
		l, _ := get(t, c, "/v1/continuity?peek=1&local=1")["work_lost"].([]any)
		return len(l) > 0
	})
	run(t, ctx, "work lost", chromedp.Navigate(base+"/ui/a/builder/lost"), chromedp.WaitVisible(`section.lost`))
	lost := value(t, ctx, "the loss", chromedp.Text(`section.lost`))
	if !strings.Contains(lost, "notes.txt") || !strings.Contains(lost, "added") {
		t.Errorf("the work lost view: %q", lost)
	}
	shoot(t, ctx, "lost")

	run(t, ctx, "context", chromedp.Navigate(base+"/ui/a/builder/context"), chromedp.WaitVisible(`svg.chart`))
	if n := count(t, ctx, "svg.chart circle.point"); n < 5 {
		t.Errorf("the context chart has %d points, want the 5 signals", n)
	}
	if n := count(t, ctx, "svg.chart line.compaction"); n != 1 {
		t.Errorf("the context chart marks %d compactions, want 1", n)
	}
	shoot(t, ctx, "context")
	run(t, ctx, "fleet", chromedp.Navigate(base+"/ui/fleet"), chromedp.WaitVisible(`main h2`))
	shoot(t, ctx, "fleet")
}
