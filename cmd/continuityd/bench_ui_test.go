//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/continuityd/continuityd/daemon"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/snapshot"
)

// BenchmarkUIInTheBrowser measures the web page in a real headless
// chromium against a daemon serving 50 places, one of them ("big") with
// 10,000 snapshots whose newest added a 10,000-line file. It reports the
// first paint of the places and of a timeline page of big, each beside a
// static page of the same bytes served by the same daemon (the test hook
// daemon.StaticPageEnv), medians of 15 loads; the 10,000-line diff, from
// navigation until it is shown (median of 7; paired with its floor in
// BenchmarkUIDiff10k); a new snapshot on an open
// timeline, from the file's change and from the moment the API lists it;
// and the daemon's CPU over 30 s with the page open and nothing happening.
//
//	go test -run '^$' -bench UIInTheBrowser -benchtime 1x -timeout 60m ./cmd/continuityd/
func BenchmarkUIInTheBrowser(b *testing.B) {
	top := b.TempDir()
	state, socket := filepath.Join(top, "state"), filepath.Join(top, "d.sock")
	static := filepath.Join(top, "static.html")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n\n[snapshots]\nkeep = 20000\n", state, socket)
	for i := range 50 {
		name := fmt.Sprintf("place%02d", i)
		if i == 0 {
			name = "big"
		}
		dir := filepath.Join(top, name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "README.md"), []byte("# "+name+"\n"), 0o644)
		fmt.Fprintf(&cfg, "\n[[agent]]\nname = %q\nworkdir = %q\n", name, dir)
	}
	config := filepath.Join(top, "continuityd.toml")
	os.WriteFile(config, []byte(cfg.String()), 0o600)
	big := filepath.Join(top, "big")
	began := time.Now()
	fillSnapshots(b, big, filepath.Join(state, "agents", "big", agent.StoreDir), 10000)
	b.Logf("10,000 snapshots made in %v", time.Since(began).Round(time.Second))

	p := startProc(&testing.T{}, socket, []string{daemon.StaticPageEnv + "=" + static}, "run", "--config", config)
	defer p.kill()
	c := p.client()
	ctx, base, evalFloat := benchBrowser(b, socket, "big")

	b.ResetTimer()
	for range b.N {
		places, placesStatic := firstPaints(b, ctx, base+"/ui/", base, static)
		timeline, timelineStatic := firstPaints(b, ctx, base+"/ui/a/big/?page=50", base, static)
		b.ReportMetric(places, "places-fp-ms")
		b.ReportMetric(placesStatic, "places-static-fp-ms")
		b.ReportMetric(places/placesStatic, "places-ratio")
		b.ReportMetric(timeline, "timeline-fp-ms")
		b.ReportMetric(timelineStatic, "timeline-static-fp-ms")
		b.ReportMetric(timeline/timelineStatic, "timeline-ratio")

		var loads []float64
		for range 7 {
			run(b, ctx, "the diff", chromedp.Navigate(base+"/ui/a/big/s/latest"), chromedp.WaitVisible(`[data-diff="shown"]`))
			loads = append(loads, evalFloat(`Math.max(performance.getEntriesByType("navigation")[0].loadEventEnd, +document.body.dataset.diffAt)`))
		}
		run(b, ctx, "every line in the page", chromedp.WaitReady(`[data-diff-all-at]`))
		lines := evalFloat(`document.querySelectorAll("pre.diff span.add").length`)
		if lines < 10000 {
			b.Fatalf("the diff shows %v added lines, want 10,000", lines)
		}
		b.ReportMetric(median(loads), "diff10k-ms")

		// A new snapshot on the open timeline.
		run(b, ctx, "the timeline", chromedp.Navigate(base+"/ui/a/place01/"), chromedp.WaitVisible(`#live.on`))
		rows := evalFloat(`document.querySelectorAll("#snapshots tr.snap").length`)
		changed := time.Now()
		os.WriteFile(filepath.Join(top, "place01", "README.md"), []byte("# place01, changed\n"), 0o644)
		var listed time.Time
		for deadline := time.Now().Add(60 * time.Second); ; {
			if s, _ := get(&testing.T{}, c, "/v1/snapshots?agent=place01")["snapshots"].([]any); listed.IsZero() && len(s) > 1 {
				listed = time.Now()
			}
			if evalFloat(`document.querySelectorAll("#snapshots tr.snap").length`) > rows {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the new snapshot never showed on the open page")
			}
			time.Sleep(5 * time.Millisecond)
		}
		shown := time.Now()
		if listed.IsZero() {
			listed = shown
		}
		b.ReportMetric(float64(shown.Sub(changed).Milliseconds()), "change-to-page-ms")
		b.ReportMetric(float64(shown.Sub(listed).Milliseconds()), "api-to-page-ms")

		// Idle: the page open on the timeline (its live stream held), 30 s.
		cpu0, wall0 := procCPU(b, p.cmd.Process.Pid), time.Now()
		time.Sleep(30 * time.Second) // the measurement's length, not a wait for something
		cpu1, wall1 := procCPU(b, p.cmd.Process.Pid), time.Now()
		b.ReportMetric(100*(cpu1-cpu0).Seconds()/wall1.Sub(wall0).Seconds(), "idle-cpu-%")
	}
}

// fillSnapshots takes n snapshots of workdir into the store dir, each
// after a small edit, the last after a 10,000-line file appeared.
func fillSnapshots(b *testing.B, workdir, dir string, n int) {
	ctx := context.Background()
	s, err := snapshot.Open(ctx, snapshot.Options{Dir: dir, Workdir: workdir, KeepCount: 20000})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range n - 1 {
		os.WriteFile(filepath.Join(workdir, "progress.txt"), []byte(strconv.Itoa(i)+"\n"), 0o644)
		if _, _, err := s.Take(ctx, "quiet", uint64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
	var big strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&big, "line %05d of a file the agent wrote whole\n", i)
	}
	os.WriteFile(filepath.Join(workdir, "big.txt"), []byte(big.String()), 0o644)
	if _, _, err := s.Take(ctx, "quiet", uint64(n)); err != nil {
		b.Fatal(err)
	}
}

// firstPaints loads url and a static copy of its bytes (served by the
// same daemon at /ui/static) in turn, 15 times each, and returns the
// median first contentful paint of each, in milliseconds.
func firstPaints(b *testing.B, ctx context.Context, url, base, static string) (page, ref float64) {
	run(b, ctx, "load "+url, chromedp.Navigate(url), chromedp.WaitVisible(`main`))
	html := value(b, ctx, "the page's bytes", chromedp.Evaluate[string](`"<!doctype html>\n" + document.documentElement.outerHTML`))
	if err := os.WriteFile(static, []byte(html), 0o644); err != nil {
		b.Fatal(err)
	}
	var pages, refs []float64
	for range 15 {
		run(b, ctx, "load "+url, chromedp.Navigate(url), chromedp.WaitVisible(`main`))
		pages = append(pages, paint(b, ctx))
		run(b, ctx, "load the static copy", chromedp.Navigate(base+"/ui/static"), chromedp.WaitVisible(`main`))
		refs = append(refs, paint(b, ctx))
	}
	return median(pages), median(refs)
}

// paint is the page's first contentful paint, ms after navigation start.
func paint(b *testing.B, ctx context.Context) float64 {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if v := value(b, ctx, "paint", chromedp.Evaluate[float64](`(performance.getEntriesByName("first-contentful-paint")[0] || {startTime: -1}).startTime`)); v >= 0 {
			return v
		}
	}
	b.Fatal("no first contentful paint")
	return 0
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// procCPU is the CPU time process pid used so far (user and system, from
// /proc/PID/stat, in clock ticks of 1/100 s).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// benchBrowser is a headless browser logged in to the page of the daemon
// on socket (the link `continuityd ui --print` gives), once the place is
// listed; base is the page's origin and evalFloat reads a number from it.
func benchBrowser(b *testing.B, socket, place string) (ctx context.Context, base string, evalFloat func(string) float64) {
	ctx = browser(b, 1200, 760)
	out, err := exec.Command(binary, "ui", "--print", "--socket", socket).Output()
	if err != nil {
		b.Fatal(err)
	}
	login := strings.TrimSpace(string(out))
	base = login[:strings.Index(login, "/ui/")]
	run(b, ctx, "login", chromedp.Navigate(login), chromedp.WaitVisible(`li.place[data-place="`+place+`"]`))
	return ctx, base, func(expr string) float64 { return value(b, ctx, expr, chromedp.Evaluate[float64](expr)) }
}
