package transcript

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/continuityd/continuityd/config"
)

// TestDefaultHomeDiscovery: with the configuration's default homes
// (transcripts.claude_home = ~/.claude, codex_home = ~/.codex) the
// transcripts are found where the agents write them,
// ~/.claude/projects/<dir>/ and ~/.codex/sessions/YYYY/MM/DD/, not under
// ~/.claude/.claude/projects.
func TestDefaultHomeDiscovery(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Transcripts
	if tr.ClaudeHome != filepath.Join(home, ".claude") || tr.CodexHome != filepath.Join(home, ".codex") {
		t.Fatalf("default homes %q %q", tr.ClaudeHome, tr.CodexHome)
	}
	wd := "/work/repo"
	proj := filepath.Join(home, ".claude", "projects", "-work-repo")
	if got := ClaudeProjectDir(tr.ClaudeHome, wd); got != proj {
		t.Fatalf("project folder %q, want %q", got, proj)
	}
	base := time.Now().Add(-time.Hour)
	session := filepath.Join(proj, "0141fab3-8bf8-4b69-be1f-89552ccfce5d.jsonl")
	writeAt(t, session, "{}\n", base)
	f := NewFinder(tr.ClaudeHome, tr.CodexHome, wd)
	if got, _, changed := f.Scan(); got != session || !changed {
		t.Fatalf("Claude Code transcript: got %q", got)
	}
	rollout := filepath.Join(home, ".codex", "sessions", "2026", "05", "11", "rollout-2026-05-11T09-00-00-x.jsonl")
	writeAt(t, rollout, codexMeta("019e-x", wd), base.Add(time.Minute))
	if got, _, changed := NewFinder(tr.ClaudeHome, tr.CodexHome, wd).Scan(); got != rollout || !changed {
		t.Fatalf("Codex rollout: got %q", got)
	}
}

func codexMeta(id, cwd string) string {
	return `{"timestamp":"2026-05-11T08:27:17.490Z","type":"session_meta","payload":{"id":"` + id + `","cwd":"` + cwd + `","cli_version":"0.125.0"}}` + "\n"
}

// TestFinderNewClaudeSession: a session started after the daemon (a new
// transcript in the project folder, even a folder that did not exist yet)
// becomes the one to follow; an older session still writing does not take
// it back.
func TestFinderNewClaudeSession(t *testing.T) {
	claude := t.TempDir()
	wd := "/work/repo"
	f := NewFinder(claude, "", wd)
	if got, _, changed := f.Scan(); got != "" || changed {
		t.Fatalf("no session yet: %q %v", got, changed)
	}
	proj := ClaudeProjectDir(claude, wd)
	if dirs := f.WatchDirs(time.Now()); len(dirs) != 1 || dirs[0] != proj {
		t.Fatalf("watch %v", dirs)
	}
	base := time.Now().Add(-time.Hour)
	a := filepath.Join(proj, "a.jsonl")
	writeAt(t, a, "{}\n", base)
	if got, _, changed := f.Scan(); got != a || !changed {
		t.Fatalf("first session: %q %v", got, changed)
	}
	if got, _, changed := f.Scan(); got != a || changed {
		t.Fatalf("nothing new: %q %v", got, changed)
	}

	// A second session starts; side chains are not sessions.
	writeAt(t, filepath.Join(proj, "agent-a1b2.jsonl"), "{}\n", base.Add(3*time.Minute))
	b := filepath.Join(proj, "b.jsonl")
	writeAt(t, b, "{}\n", base.Add(2*time.Minute))
	got, mod, changed := f.Scan()
	if got != b || !changed || !mod.Equal(base.Add(2*time.Minute)) || !f.PickedNew() {
		t.Fatalf("second session: %q %v %v, new %v", got, mod, changed, f.PickedNew())
	}
	// The first one is still in use and written to: the choice stays.
	if err := os.Chtimes(a, base.Add(5*time.Minute), base.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _, changed := f.Scan(); got != b || changed {
		t.Fatalf("after the old session wrote: %q %v", got, changed)
	}
	// A hook names the old one: it stays until a new session appears.
	f.Follow(a)
	if got, _, changed := f.Scan(); got != a || changed {
		t.Fatalf("after Follow: %q %v", got, changed)
	}
	c := filepath.Join(proj, "c.jsonl")
	writeAt(t, c, "{}\n", base.Add(time.Minute)) // an older time: still a new file
	if got, _, changed := f.Scan(); got != c || !changed {
		t.Fatalf("third session: %q %v", got, changed)
	}
	// The one followed is removed: the newest left.
	os.Remove(c)
	if got, _, changed := f.Scan(); got != a || !changed {
		t.Fatalf("after removal: %q %v", got, changed)
	}
}

// TestFinderNewCodexSession: a new rollout naming the workdir becomes the
// one to follow; rollouts of other directories, and one whose first line
// is not written yet, do not.
func TestFinderNewCodexSession(t *testing.T) {
	codex := t.TempDir()
	root := filepath.Join(codex, "sessions")
	wd := "/work/repo"
	base := time.Now().Add(-time.Hour)
	a := filepath.Join(root, "2026", "05", "10", "rollout-2026-05-10T09-00-00-a.jsonl")
	writeAt(t, a, codexMeta("a", wd), base)
	writeAt(t, filepath.Join(root, "2026", "05", "10", "rollout-2026-05-10T10-00-00-o.jsonl"), codexMeta("o", "/work/other"), base.Add(time.Minute))
	f := NewFinder("", codex, wd)
	if got, _, changed := f.Scan(); got != a || !changed {
		t.Fatalf("first: %q", got)
	}
	now := time.Date(2026, 5, 11, 12, 0, 0, 0, time.Local)
	if dirs := f.WatchDirs(now); len(dirs) != 1 || dirs[0] != filepath.Join(root, "2026", "05", "11") {
		t.Fatalf("watch %v", dirs)
	}

	// Another directory's new session, and a new rollout still empty.
	writeAt(t, filepath.Join(root, "2026", "05", "11", "rollout-2026-05-11T09-00-00-o2.jsonl"), codexMeta("o2", "/work/other"), base.Add(2*time.Minute))
	b := filepath.Join(root, "2026", "05", "11", "rollout-2026-05-11T09-30-00-b.jsonl")
	writeAt(t, b, "", base.Add(3*time.Minute))
	if got, _, changed := f.Scan(); got != a || changed {
		t.Fatalf("nothing new for the workdir: %q %v", got, changed)
	}
	// Its session_meta is written: now it is the workdir's new session.
	writeAt(t, b, codexMeta("b", wd+"/"), base.Add(3*time.Minute))
	if got, _, changed := f.Scan(); got != b || !changed {
		t.Fatalf("new session: %q %v", got, changed)
	}
}

// WatchChains names each folder where a session appears and its parents
// up to the agent's home, so a folder created later is seen in its parent.
func TestFinderWatchChains(t *testing.T) {
	f := NewFinder("/h/.claude", "/h/.codex", "/w")
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.Local)
	got := f.WatchChains(now)
	want := [][]string{
		{"/h/.claude/projects/-w", "/h/.claude/projects", "/h/.claude"},
		{"/h/.codex/sessions/2026/03/04", "/h/.codex/sessions/2026/03", "/h/.codex/sessions/2026", "/h/.codex/sessions", "/h/.codex"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WatchChains = %q, want %q", got, want)
	}
}

// TestFinderSkipsTakenTranscripts: two agents on one workdir, each with
// its Finder over both homes and one rule for what the other follows.
// The second never picks the first's transcript (the newest), but the
// newest left; a fresh session that is taken is not moved to; and when
// the one followed becomes the other's (a hook named it), the Finder lets
// go of it: to the newest left, or to none, until one is free again.
func TestFinderSkipsTakenTranscripts(t *testing.T) {
	claude, codex := t.TempDir(), t.TempDir()
	wd := "/work/repo"
	base := time.Now().Add(-time.Hour)
	proj := ClaudeProjectDir(claude, wd)
	older := filepath.Join(proj, "older.jsonl")
	writeAt(t, older, "{}\n", base)
	rollout := filepath.Join(codex, "sessions", "2026", "05", "11", "rollout-2026-05-11T09-00-00-r.jsonl")
	writeAt(t, rollout, codexMeta("r", wd), base.Add(time.Minute))

	held := map[string]string{} // path → agent
	finder := func(agent string) *Finder {
		f := NewFinder(claude, codex, wd)
		f.SetTaken(func(p string) bool { return held[p] != "" && held[p] != agent })
		return f
	}
	a, b := finder("a"), finder("b")
	got, _, _ := a.Scan()
	if got != rollout {
		t.Fatalf("a: %q, want the newest %q", got, rollout)
	}
	held[got] = "a"
	if got, _, changed := b.Scan(); got != older || !changed {
		t.Fatalf("b: %q %v, want the newest a does not follow, %q", got, changed, older)
	}
	if b.PickedNew() {
		t.Error("a first Scan's pick is a new session")
	}
	held[older] = "b"

	// A new session that a's hook names at once: b does not move to it.
	newer := filepath.Join(proj, "newer.jsonl")
	writeAt(t, newer, "{}\n", base.Add(2*time.Minute))
	held[newer] = "a"
	if got, _, changed := b.Scan(); got != older || changed {
		t.Fatalf("b moved to a's new session: %q %v", got, changed)
	}

	// a's hook names b's transcript: b lets go, to the newest left
	// (the rollout a left), then to none when that is taken too.
	held[older], held[rollout] = "a", ""
	if got, _, changed := b.Scan(); got != rollout || !changed {
		t.Fatalf("b after losing its transcript: %q %v, want %q", got, changed, rollout)
	}
	if b.PickedNew() {
		t.Error("the rollout b fell back to is a new session: its history would count as news")
	}
	held[rollout] = "a"
	if got, _, changed := b.Scan(); got != "" || !changed {
		t.Fatalf("b with every transcript taken: %q %v, want none", got, changed)
	}
	// a lets go of the rollout (its session moved on): b, following none,
	// takes it although it is not new.
	held[rollout] = ""
	if got, _, changed := b.Scan(); got != rollout || !changed {
		t.Fatalf("b following none while the rollout is free: %q %v", got, changed)
	}
}

// TestBelongsTo: a transcript belongs to the agent whose workdir its
// session was launched in: a Claude Code session in the workdir's project
// folder (not a side chain, not a subdirectory's or a neighbour's), a
// Codex rollout whose session_meta names the workdir.
func TestBelongsTo(t *testing.T) {
	top := t.TempDir()
	claude, codex := filepath.Join(top, "claude"), filepath.Join(top, "codex")
	work, other := filepath.Join(top, "work"), filepath.Join(top, "work", "sub")
	rollout := func(name, cwd string) string {
		p := filepath.Join(codex, "sessions", "2026", "05", "11", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(codexMeta("id", cwd)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine, theirs := rollout("rollout-a.jsonl", work), rollout("rollout-b.jsonl", other)
	for path, want := range map[string]bool{
		filepath.Join(ClaudeProjectDir(claude, work), "s.jsonl"):       true,
		filepath.Join(ClaudeProjectDir(claude, work), "agent-1.jsonl"): false,
		filepath.Join(ClaudeProjectDir(claude, other), "s.jsonl"):      false,
		filepath.Join(ClaudeProjectDir(claude, work), "s.txt"):         false,
		mine:   true,
		theirs: false,
	} {
		if got := BelongsTo(nil, claude, codex, work, path); got != want {
			t.Errorf("BelongsTo(%s) = %v, want %v", path, got, want)
		}
	}
	if BelongsTo(nil, "", codex, work, filepath.Join(ClaudeProjectDir(claude, work), "s.jsonl")) || BelongsTo(nil, claude, "", work, mine) {
		t.Error("a transcript of a kind the agent has no home for belongs to it")
	}
}

// TestBelongsUnder: a hook's session in a subdirectory of the workdir is
// the workdir's, by the cwd its transcript names; a neighbour's (work-2)
// and a subdirectory's transcript naming another cwd are not.
func TestBelongsUnder(t *testing.T) {
	top := t.TempDir()
	claude, codex := filepath.Join(top, "claude"), filepath.Join(top, "codex")
	work := filepath.Join(top, "work")
	sub, neighbour := filepath.Join(work, "sub"), filepath.Join(top, "work-2")
	claudeT := func(launch, cwd string) string {
		p := filepath.Join(ClaudeProjectDir(claude, launch), "s.jsonl")
		os.MkdirAll(filepath.Dir(p), 0o755)
		line := `{"type":"file-history-snapshot"}` + "\n" + `{"type":"user","cwd":"` + cwd + `"}` + "\n"
		if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rollout := func(name, cwd string) string {
		p := filepath.Join(codex, "sessions", "2026", "05", "11", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(codexMeta("id", cwd)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for path, want := range map[string]bool{
		claudeT(work, work):                   true,
		claudeT(sub, sub):                     true,
		claudeT(neighbour, neighbour):         false,
		rollout("rollout-a.jsonl", sub):       true,
		rollout("rollout-b.jsonl", neighbour): false,
	} {
		if got := BelongsUnder(nil, claude, codex, work, path); got != want {
			t.Errorf("BelongsUnder(%s) = %v, want %v", path, got, want)
		}
	}
	// A subdirectory's folder whose transcript names another cwd.
	if p := claudeT(filepath.Join(work, "x"), neighbour); BelongsUnder(nil, claude, codex, work, p) {
		t.Errorf("BelongsUnder(%s) naming %s = true", p, neighbour)
	}
}
