//go:build linux

package main

import (
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// weekSummaryEnv names a file the compressed week writes its summary to
// (besides the test's log), for docs/perf.
const weekSummaryEnv = "CONTINUITYD_WEEK_SUMMARY"

// weekPlan is the size of a compressed week: the same generator plays
// the 2-minute version in the normal test run and the hour-long one
// under -tags week (week_plan_*_test.go).
type weekPlan struct {
	days, stepsPerDay, samplesPerDay int
	seed                             int64
	// idleAfter is the daemon's test hook for [places] idle_after, "" for
	// the default (8h): in the hour-long week gamma, away on days 2 and 3,
	// is unwatched, then watched again and caught up on day 4.
	idleAfter string
}

// weekPlace is a project the generator works in: its directory, its
// agent's name, whether it is a git repository, and its session.
type weekPlace struct {
	name, dir   string
	git         bool
	session     string
	open        bool
	branch      string
	files       []string
	sessionSeq  int
	adoptedFrom string // the directory its first hook came from
}

// weekRun is one compressed week in progress.
type weekRun struct {
	t       *testing.T
	h       *placesHome
	plan    weekPlan
	rng     *rand.Rand
	p       *proc
	c       *http.Client
	places  []*weekPlace
	state   string
	events  int
	counts  map[string]int
	samples []weekSample
	acked   []string // focuses acknowledged just before a restart
}

// TestCompressedWeek plays a week of an agent's work against a real
// daemon subprocess in minutes (the short plan) or an hour (-tags week):
// three projects adopted as places by real hooks and one configured
// agent; turns (UserPromptSubmit, PreToolUse, the write, PostToolUse,
// Stop), compactions, sessions ending, a person's edits and deletions,
// discards (`git checkout -- .`), restores (`snapshot restore`), commits,
// branch switches, a reload every day, restarts (SIGTERM, then SIGKILL
// twice) in the first half; gamma is away on days 2 and 3. Retention is compressed by config (keep 12,
// 4 MiB, the journal keeping every version for a minute) and idle places
// are unwatched after seconds (the daemon's test hook). From outside, it
// samples the daemon's RSS, heap, goroutines, open files, inotify
// watches, the state directory's bytes (by part, the local archive apart)
// and files, the snapshots and the journals, and fails when one grows over the second half (by events
// done) faster than what is kept allows; every checkpoint acknowledged
// before a restart must be in the resume after it, and each agent keeps
// at most keep snapshots.
func TestCompressedWeek(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end, minutes")
	}
	plan := weekPlanNow
	h := newPlacesHome(t)
	w := &weekRun{t: t, h: h, plan: plan, rng: rand.New(rand.NewSource(plan.seed)), counts: map[string]int{},
		state: filepath.Join(h.home, ".local", "state", "continuityd")}
	for _, pl := range []struct {
		name, sub string
		git       bool
	}{{"alpha", "src", true}, {"beta", "", true}, {"gamma", "", false}, {"desk", "", true}} {
		wp := &weekPlace{name: pl.name, dir: filepath.Join(h.home, pl.name), git: pl.git, branch: "main"}
		wp.adoptedFrom = filepath.Join(wp.dir, pl.sub)
		if err := os.MkdirAll(wp.adoptedFrom, 0o755); err != nil {
			t.Fatal(err)
		}
		w.places = append(w.places, wp)
		for i := 0; i < 4; i++ {
			w.write(wp, fmt.Sprintf("f%d.go", i))
		}
	}
	const keep, keepBytes = 12, 4 << 20
	writeFile(t, filepath.Join(h.home, ".config", "continuityd"), "continuityd.toml", fmt.Sprintf(`[watch]
quiet = "100ms"
settle = "50ms"

[policy]
quiet = "500ms"
min_interval = "500ms"
max_delay = "3s"

[snapshots]
keep = %d
keep_bytes = %d
journal_keep_all = "1m"
journal_keep_hourly = "3m"

[[agent]]
name = "desk"
workdir = %q
`, keep, keepBytes, filepath.Join(h.home, "desk")))
	h.own(t)
	for _, wp := range w.places {
		if wp.git {
			w.git(wp, "init", "-q", "-b", "main")
			w.git(wp, "add", "-A")
			w.git(wp, "commit", "-qm", "start")
		}
	}
	env := h.env
	if plan.idleAfter != "" {
		env = append(env, "CONTINUITYD_TEST_IDLE_AFTER="+plan.idleAfter)
	}
	w.start(env)

	for day := 1; day <= plan.days; day++ {
		for step := 0; step < plan.stepsPerDay; step++ {
			w.step(day)
			if (step+1)%(plan.stepsPerDay/plan.samplesPerDay) == 0 {
				w.sample()
			}
		}
		// A reload every day (as logrotate or an edit of the config would).
		w.p.cmd.Process.Signal(syscall.SIGHUP)
		w.counts["reload"]++
		switch day {
		case 1:
			w.restart(env, false)
		case 2, 3:
			w.restart(env, true)
		}
	}
	resources := weekResources(keep, len(w.places), keepBytes)
	figs := weekFigures(w.samples, resources)
	summary := fmt.Sprintf("compressed week: %d days, %d events (seed %d), %d samples; events by kind: %v\n"+
		"slopes fitted over the second half by events done (after the warm-up and the restarts of days 1-3)\n\n%s\n%s",
		plan.days, w.events, plan.seed, len(w.samples), w.counts, weekSummary(figs), stateParts(w.samples))
	t.Log("\n" + summary)
	if path := os.Getenv(weekSummaryEnv); path != "" {
		os.WriteFile(path, []byte(summary+"\n"+weekSampleTable(w.samples, resources)+"\n"+statePartsTable(w.samples)), 0o644)
	}
	for _, f := range figs {
		if f.failure != "" {
			t.Errorf("%s", f.failure)
		}
	}

	// The end: a SIGKILL, and nothing acknowledged is lost; retention kept
	// each agent within keep.
	// A place is served again at its next session.
	w.restart(env, true)
	for _, wp := range w.places {
		w.ensureSession(wp)
		var n int
		waitUntil(t, func() string {
			return fmt.Sprintf("%s keeps %d snapshots after the week, want 1 to %d", wp.name, n, keep)
		},
			func() bool { n = len(agentSnapshots(t, w.c, wp.name)); return n >= 1 && n <= keep })
	}
}

// weekSampleTable is every sample, one line each, for the summary file.
func weekSampleTable(samples []weekSample, resources []struct {
	name string
	b    weekBound
}) string {
	var b strings.Builder
	b.WriteString("events")
	for _, r := range resources {
		b.WriteString(" " + r.name)
	}
	b.WriteString("\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%d", s.events)
		for _, r := range resources {
			fmt.Fprintf(&b, " %.0f", s.vals[r.name])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// start starts the daemon as the home's user, as its service would.
func (w *weekRun) start(env []string) {
	w.t.Helper()
	w.p = startProcWith(w.t, w.h.setup(w.h.home), w.h.sock, env, "run")
	if w.c != nil {
		w.c.CloseIdleConnections()
	}
	w.c = w.p.client()
	w.t.Cleanup(w.c.CloseIdleConnections)
	for _, wp := range w.places {
		wp.open = false
	}
}

// restart stops the daemon (SIGKILL when kill, else SIGTERM) after a
// checkpoint it acknowledged, starts it again, and checks the
// checkpoint is in the resume.
func (w *weekRun) restart(env []string, kill bool) {
	t := w.t
	t.Helper()
	desk := w.places[len(w.places)-1]
	focus := fmt.Sprintf("week event %d before a restart", w.events)
	if code, _, errs := w.h.cli(t, desk.dir, "", "checkpoint", "--focus", focus); code != 0 {
		t.Fatalf("checkpoint before the restart: exit %d %s", code, errs)
	}
	w.acked = append(w.acked, focus)
	if kill {
		w.p.kill()
		w.counts["sigkill"]++
	} else if code := w.p.terminate(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, w.p.stderr)
	} else {
		w.counts["sigterm"]++
	}
	w.start(env)
	if code, out, errs := w.h.cli(t, desk.dir, "", "resume", "--peek"); code != 0 || !strings.Contains(out, focus) {
		t.Fatalf("after the restart the acknowledged checkpoint %q is not in the resume: exit %d %q %s", focus, code, out, errs)
	}
}

// sample reads every resource from outside the daemon.
func (w *weekRun) sample() {
	pid := w.p.cmd.Process.Pid
	v := map[string]float64{"rss_bytes": procStatus(pid, "VmRSS") * 1024}
	v["open_fds"], v["inotify_watches"] = procFds(pid)
	m := scrapeMetrics(w.c, "go_goroutines", "go_memstats_heap_inuse_bytes")
	v["goroutines"], v["heap_inuse_bytes"] = m["go_goroutines"], m["go_memstats_heap_inuse_bytes"]
	var parts map[string]float64
	v["state_bytes"], v["state_files"], v["journal_bytes"], parts = stateUsage(w.state)
	for k, b := range parts {
		v[statePartPrefix+k] = b
	}
	v["archive_bytes"] = parts[weekArchivePart]
	v["kept_bytes"] = v["state_bytes"] - v["archive_bytes"]
	for _, wp := range w.places {
		v["snapshots"] += float64(len(agentSnapshots(w.t, w.c, wp.name)))
	}
	w.samples = append(w.samples, weekSample{events: w.events, vals: v})
}

// step is one event of the week, drawn by the seeded generator.
func (w *weekRun) step(day int) {
	wp := w.places[w.rng.Intn(len(w.places))]
	for wp.name == "gamma" && (day == 2 || day == 3) { // away
		wp = w.places[w.rng.Intn(len(w.places))]
	}
	kinds := []struct {
		name   string
		weight int
	}{{"turn", 40}, {"edit", 18}, {"compaction", 5}, {"session_end", 5}, {"delete", 3},
		{"discard", 4}, {"restore", 3}, {"commit", 8}, {"branch", 3}}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	pick, kind := w.rng.Intn(total), ""
	for _, k := range kinds {
		if pick < k.weight {
			kind = k.name
			break
		}
		pick -= k.weight
	}
	if !wp.git && (kind == "discard" || kind == "commit" || kind == "branch") {
		kind = "edit"
	}
	w.events++
	w.counts[kind]++
	switch kind {
	case "turn":
		w.ensureSession(wp)
		rel := w.pickFile(wp)
		w.hook(wp, "input-userpromptsubmit.json", nil)
		w.hook(wp, "input-pretooluse-common-fields.json", func(m map[string]any) {
			m["tool_name"], m["tool_input"] = "Write", map[string]any{"file_path": filepath.Join(wp.dir, rel), "content": "…"}
			m["tool_use_id"] = fmt.Sprintf("toolu_%d", w.events)
		})
		w.write(wp, rel)
		w.hook(wp, "input-posttooluse-write.json", func(m map[string]any) {
			m["tool_input"].(map[string]any)["file_path"] = filepath.Join(wp.dir, rel)
			m["tool_response"].(map[string]any)["filePath"] = filepath.Join(wp.dir, rel)
			m["tool_use_id"] = fmt.Sprintf("toolu_%d", w.events)
		})
		w.hook(wp, "input-stop.json", nil)
	case "edit":
		for i := 0; i <= w.rng.Intn(2); i++ {
			w.write(wp, w.pickFile(wp))
		}
	case "compaction":
		w.ensureSession(wp)
		w.hook(wp, "input-precompact-manual.json", nil)
		w.hook(wp, "input-postcompact-manual.json", nil)
	case "session_end":
		if wp.open {
			w.hook(wp, "input-sessionend-other.json", nil)
			wp.open = false
		}
	case "delete":
		if len(wp.files) > 2 {
			i := w.rng.Intn(len(wp.files))
			os.Remove(filepath.Join(wp.dir, wp.files[i]))
			wp.files = append(wp.files[:i], wp.files[i+1:]...)
		}
	case "discard":
		w.git(wp, "checkout", "-q", "--", ".")
		w.refreshFiles(wp)
	case "restore":
		ids := agentSnapshots(w.t, w.c, wp.name)
		if len(ids) >= 2 {
			code, _, errs := w.h.cli(w.t, wp.dir, "", "snapshot", "restore", ids[1], "--all", "--agent", wp.name)
			if code != 0 {
				// A restore may be refused (the tree moved under it);
				// refused with a reason is fine, anything else is not.
				if code != 1 || strings.TrimSpace(errs) == "" {
					w.t.Fatalf("snapshot restore %s in %s: exit %d %q", ids[1], wp.name, code, errs)
				}
				w.counts["restore_refused"]++
			}
			w.refreshFiles(wp)
		}
	case "commit":
		w.git(wp, "add", "-A")
		w.git(wp, "commit", "-qm", fmt.Sprintf("event %d", w.events), "--allow-empty")
	case "branch":
		w.git(wp, "add", "-A")
		w.git(wp, "commit", "-qm", fmt.Sprintf("before a switch, event %d", w.events), "--allow-empty")
		next := "main"
		if wp.branch == "main" {
			next = fmt.Sprintf("topic-%d", w.rng.Intn(3))
		}
		w.git(wp, "checkout", "-q", "-B", next)
		wp.branch = next
		w.refreshFiles(wp)
	}
}

// ensureSession starts the place's session (SessionStart) if none is open.
func (w *weekRun) ensureSession(wp *weekPlace) {
	if wp.open {
		return
	}
	wp.sessionSeq++
	wp.session = fmt.Sprintf("%s-s%d", wp.name, wp.sessionSeq)
	wp.open = true
	out := w.hook(wp, "input-sessionstart-startup.json", nil)
	if ctx := sessionContext(w.t, out); !strings.Contains(ctx, "# Where "+wp.name+" was") {
		w.t.Fatalf("%s's SessionStart after %d events is not answered by its place: %q\nlog:\n%s", wp.name, w.events, ctx, w.p.stderr)
	}
}

// hook runs `continuityd hook` in the place with a Claude Code payload
// (testdata/agents) set to its session and directory, and returns what
// it printed.
func (w *weekRun) hook(wp *weekPlace, fixture string, set func(m map[string]any)) string {
	t := w.t
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-code", fixture))
	if err != nil {
		t.Fatal(err)
	}
	payload := jsonLine(t, string(raw), func(m map[string]any) {
		m["cwd"], m["session_id"] = wp.adoptedFrom, wp.session
		delete(m, "transcript_path")
		if set != nil {
			set(m)
		}
	})
	code, out, errs := w.h.cli(t, wp.adoptedFrom, payload, "hook")
	if code != 0 {
		t.Fatalf("hook %s in %s after %d events: exit %d %s", fixture, wp.name, w.events, code, errs)
	}
	return out
}

// pickFile is one of a bounded set of names (a project's files change,
// their number stays about the same), new or existing.
func (w *weekRun) pickFile(wp *weekPlace) string {
	dirs := []string{"", "src/", "docs/"}
	return fmt.Sprintf("%sf%d.go", dirs[w.rng.Intn(len(dirs))], w.rng.Intn(12))
}

// write gives rel new content: a few lines to a few KiB, owned by the
// home's user.
func (w *weekRun) write(wp *weekPlace, rel string) {
	p := filepath.Join(wp.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if w.h.cred != nil {
		os.Lchown(filepath.Dir(p), daemonID, daemonID)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\n// event %d\n", wp.name, w.events)
	for i, n := 0, 1+w.rng.Intn(120); i < n; i++ {
		fmt.Fprintf(&b, "var v%d = %q\n", i, fmt.Sprint(w.rng.Int63()))
	}
	w.h.write(w.t, p, b.String())
	w.refreshFiles(wp)
}

// refreshFiles lists the place's files as they are now.
func (w *weekRun) refreshFiles(wp *weekPlace) {
	wp.files = wp.files[:0]
	filepath.WalkDir(wp.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(wp.dir, p)
			wp.files = append(wp.files, rel)
		}
		return nil
	})
}

// git runs git in the place as the home's user; a failure (a branch
// switch refused) is counted, not fatal: a person's git fails too.
func (w *weekRun) git(wp *weekPlace, args ...string) {
	cmd := exec.Command("git", args...)
	w.h.setup(wp.dir)(cmd)
	cmd.Env = userGitEnv(w.h.home)
	if out, err := cmd.CombinedOutput(); err != nil {
		w.counts["git_failed"]++
		w.t.Logf("git %s in %s: %v %s", strings.Join(args, " "), wp.name, err, out)
	}
}
