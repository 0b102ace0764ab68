//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/continuityd/continuityd/daemon"
)

// BenchmarkUIDiff10k measures a 10,000-line diff shown in a real headless
// chromium, paired: each load of the changes view is followed by a load of
// a static page of the very bytes the view ended with (its whole diff in
// the document, served by the same daemon at /ui/static), the floor of
// what any page of that diff costs the browser, alternating 9 times.
// "shown" is from the navigation's start until every line of the diff is
// in the page (the view carries its first lines, its script fetches the
// rest of each file and marks the body data-diff="shown"), or the load
// event if later; the first paint and the first byte are reported beside
// it.
//
//	go test -run '^$' -bench UIDiff10k -benchtime 1x ./cmd/continuityd/
func BenchmarkUIDiff10k(b *testing.B) {
	top := b.TempDir()
	state, socket, work := filepath.Join(top, "state"), filepath.Join(top, "d.sock"), filepath.Join(top, "big")
	static := filepath.Join(top, "static.html")
	os.MkdirAll(work, 0o755)
	os.WriteFile(filepath.Join(work, "README.md"), []byte("# big\n"), 0o644)
	config := filepath.Join(top, "continuityd.toml")
	os.WriteFile(config, []byte(fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n\n[[agent]]\nname = \"big\"\nworkdir = %q\n", state, socket, work)), 0o600)

	p := startProc(&testing.T{}, socket, []string{daemon.StaticPageEnv + "=" + static}, "run", "--config", config)
	defer p.kill()
	c := p.client()
	snapshots := func() int {
		s, _ := get(&testing.T{}, c, "/v1/snapshots")["snapshots"].([]any)
		return len(s)
	}
	benchUntil(b, func() string { return "no start snapshot" }, func() bool { return snapshots() > 0 })
	var big strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&big, "line %05d of a file the agent wrote whole\n", i)
	}
	os.WriteFile(filepath.Join(work, "big.txt"), []byte(big.String()), 0o644)
	if code, _, err := post(c, "/v1/snapshots", map[string]any{"message": "the big file"}); err != nil || code != 200 {
		b.Fatalf("snapshot take: %d %v", code, err)
	}

	ctx, base, evalFloat := benchBrowser(b, socket, "big")
	view := base + "/ui/a/big/s/latest"
	run(b, ctx, "the diff", chromedp.Navigate(view), chromedp.WaitVisible(`[data-diff="shown"]`))
	// Every line ends up in the document (those out of view while the
	// browser is idle), the last one too.
	const added = `document.querySelectorAll("pre.diff span.add").length`
	var shown float64
	benchUntil(b, func() string { return fmt.Sprintf("the diff shows %v added lines, want 10,000", shown) },
		func() bool { shown = evalFloat(added); return shown >= 10000 })
	if last := value(b, ctx, "the last line", chromedp.Evaluate[string](`Array.from(document.querySelectorAll("pre.diff span.add")).pop().textContent`)); !strings.Contains(last, "line 09999") {
		b.Fatalf("the diff's last line is %q", last)
	}
	html := value(b, ctx, "the page's bytes", chromedp.Evaluate[string](`"<!doctype html>\n" + document.documentElement.outerHTML`))
	// The static copy keeps the diff whole and is not fetched again by
	// the script (no data-diff-src left to follow).
	if err := os.WriteFile(static, []byte(html), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("the view's final document: %d bytes", len(html))

	b.ResetTimer()
	for range b.N {
		var shown, all, paints, ttfb, refs, refPaints []float64
		for range 9 {
			run(b, ctx, "the diff", chromedp.Navigate(view), chromedp.WaitVisible(`[data-diff="shown"]`))
			shown = append(shown, evalFloat(`Math.max(performance.getEntriesByType("navigation")[0].loadEventEnd, +(document.querySelector("[data-diff-at]") || {dataset: {diffAt: 0}}).dataset.diffAt)`))
			paints = append(paints, paint(b, ctx))
			run(b, ctx, "every line in the page", chromedp.WaitReady(`[data-diff-all-at]`))
			all = append(all, evalFloat(`+document.body.dataset.diffAllAt`))
			ttfb = append(ttfb, evalFloat(`performance.getEntriesByType("navigation")[0].responseStart`))
			run(b, ctx, "the static copy", chromedp.Navigate(base+"/ui/static"), chromedp.WaitVisible(`pre.diff`))
			refs = append(refs, evalFloat(`performance.getEntriesByType("navigation")[0].loadEventEnd`))
			refPaints = append(refPaints, paint(b, ctx))
		}
		b.Logf("shown (ms): %v; every line in the page: %v; static copy: %v", shown, all, refs)
		b.ReportMetric(median(all), "diff10k-all-ms")
		b.ReportMetric(median(shown), "diff10k-shown-ms")
		b.ReportMetric(median(paints), "diff10k-fp-ms")
		b.ReportMetric(median(ttfb), "diff10k-ttfb-ms")
		b.ReportMetric(median(refs), "static-load-ms")
		b.ReportMetric(median(refPaints), "static-fp-ms")
	}
}
