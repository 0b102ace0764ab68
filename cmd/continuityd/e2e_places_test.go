//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/sources/transcript"
)

// placesHome is a user's home for the places tests: HOME, its runtime
// directory, and how to run the daemon and the CLI as that user (the
// unprivileged daemonID when the tests run as root, as CI does).
type placesHome struct {
	top, home, run, sock string
	env                  []string
	cred                 *syscall.Credential
}

func newPlacesHome(t *testing.T) *placesHome {
	t.Helper()
	top, err := os.MkdirTemp("", "cdplaces")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	h := &placesHome{top: top, home: filepath.Join(top, "home"), run: filepath.Join(top, "run")}
	for _, d := range []string{h.home, h.run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h.sock = filepath.Join(h.run, "continuityd", "continuityd.sock")
	h.env = []string{"HOME=" + h.home, "XDG_RUNTIME_DIR=" + h.run, "XDG_STATE_HOME=", "XDG_CONFIG_HOME=",
		"CONTINUITYD_STATE_DIR=", "CONTINUITYD_SOCKET="}
	if os.Geteuid() == 0 {
		for _, d := range []string{top, filepath.Dir(binary)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		h.cred = asDaemon
	}
	return h
}

// own gives everything under the test's top to the user the daemon runs as.
func (h *placesHome) own(t *testing.T) {
	t.Helper()
	if h.cred != nil {
		filepath.Walk(h.top, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, daemonID, daemonID) })
	}
}

// setup runs a command as the home's user in dir.
func (h *placesHome) setup(dir string) func(*exec.Cmd) {
	return func(c *exec.Cmd) {
		c.Dir = dir
		if h.cred != nil {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: h.cred}
		}
	}
}

// cli runs the CLI as the home's user in dir.
func (h *placesHome) cli(t *testing.T, dir, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	h.setup(dir)(cmd)
	cmd.Env = append(os.Environ(), h.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// sessionContext is what a SessionStart hook's output gives the agent.
func sessionContext(t *testing.T, out string) string {
	t.Helper()
	var o struct {
		H struct {
			Ctx string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("SessionStart output %q: %v", out, err)
	}
	return o.H.Ctx
}

// claudeSessionStart is Claude Code's SessionStart payload (the documented
// one) for a session in cwd with its transcript.
func claudeSessionStart(t *testing.T, cwd, transcriptPath, session string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-code", "input-sessionstart-startup.json"))
	if err != nil {
		t.Fatal(err)
	}
	return jsonLine(t, string(raw), func(m map[string]any) {
		m["cwd"], m["transcript_path"], m["session_id"] = cwd, transcriptPath, session
	})
}

// codexSessionStart is Codex's SessionStart payload: a captured Codex
// hook payload (the same session_id, turn_id, transcript_path, cwd and
// model fields) as SessionStart sends it.
func codexSessionStart(t *testing.T, cwd, transcriptPath string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "agents", "codex", "hook-precompact-auto-captured-gpt-5.5-sirsi-pantheon-line1.json"))
	if err != nil {
		t.Fatal(err)
	}
	return jsonLine(t, string(raw), func(m map[string]any) {
		delete(m, "trigger")
		delete(m, "turn_id")
		m["hook_event_name"], m["source"], m["permission_mode"] = "SessionStart", "startup", "default"
		m["cwd"], m["transcript_path"] = cwd, transcriptPath
	})
}

// component is the state and detail of agent's part name in status.
func component(t *testing.T, c *http.Client, agent, name string) string {
	t.Helper()
	for _, a := range asList(get(t, c, "/v1/status")["agents"]) {
		if am := a.(map[string]any); am["name"] == agent {
			for _, comp := range asList(am["components"]) {
				if cm := comp.(map[string]any); cm["name"] == name {
					return fmt.Sprintf("%v: %v", cm["state"], cm["detail"])
				}
			}
		}
	}
	return ""
}

// placeStatus is the place name as status lists it, nil when it does not.
func placeStatus(t *testing.T, p *proc, name string) map[string]any {
	t.Helper()
	c := p.client()
	defer c.CloseIdleConnections()
	for _, pl := range asList(get(t, c, "/v1/status")["places"]) {
		if m := pl.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

// TestPlacesEachSessionItsOwnProject is the user's daemon as its service
// runs it (`run` in the home, no config): real Claude Code and Codex
// SessionStart payloads from three projects, one from a subdirectory,
// each adopt their project as a place and see only its state, work lost
// and restore commands; a session in an unrelated directory gets nothing
// of any; each transcript is followed by its own place; the CLI acts on
// the place of the directory it runs in and, from elsewhere, names the
// places and --agent.
func TestPlacesEachSessionItsOwnProject(t *testing.T) {
	h := newPlacesHome(t)
	alpha, beta, gamma := filepath.Join(h.home, "alpha"), filepath.Join(h.home, "beta"), filepath.Join(h.home, "gamma")
	elsewhere := filepath.Join(h.top, "elsewhere")
	for _, d := range []string{filepath.Join(alpha, "src"), beta, gamma, elsewhere} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for dir, files := range map[string][]string{alpha: {"alpha.go", "src/alpha_src.go"}, beta: {"beta.go"}} {
		userGit(t, dir, "init", "-q", "-b", "main")
		for _, f := range files {
			writeFile(t, dir, f, "package "+filepath.Base(dir)+"\n")
		}
		userGit(t, dir, "add", "-A")
		userGit(t, dir, "commit", "-qm", "start")
	}
	writeFile(t, gamma, "gamma.txt", "gamma, no git\n")
	// Work in alpha that no commit holds: lost once deleted.
	writeFile(t, alpha, "src/unsaved_alpha.go", "package alpha // not committed\n")

	// The transcripts, where Claude Code and Codex keep them.
	claudeHome := filepath.Join(h.home, ".claude")
	short := agentFixture(t, "claude-code/transcript-short-session-v2.1.38.jsonl")
	alphaT := filepath.Join(transcript.ClaudeProjectDir(claudeHome, filepath.Join(alpha, "src")), "0b5c7e4e-alpha.jsonl")
	gammaT := filepath.Join(transcript.ClaudeProjectDir(claudeHome, gamma), "5d0e9f2a-gamma.jsonl")
	for f, cwd := range map[string]string{alphaT: filepath.Join(alpha, "src"), gammaT: gamma} {
		// The session ran there: its lines say so.
		lines := strings.ReplaceAll(strings.Join(short, "\n")+"\n", `"cwd":"/home/marco/projects/spotter"`, `"cwd":"`+cwd+`"`)
		writeFile(t, filepath.Dir(f), filepath.Base(f), lines)
	}
	now := time.Now()
	betaT := filepath.Join(h.home, ".codex", "sessions", now.Format("2006"), now.Format("01"), now.Format("02"),
		"rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl")
	rollout := agentFixture(t, "codex/rollout-apply-patch-v0.104.0.jsonl")
	writeFile(t, filepath.Dir(betaT), filepath.Base(betaT), jsonLine(t, rollout[0], func(m map[string]any) {
		m["payload"].(map[string]any)["cwd"] = beta
	}))
	// The user's own config file, which `run` reads without --config:
	// no [[agent]], snapshots soon after a change.
	writeFile(t, filepath.Join(h.home, ".config", "continuityd"), "continuityd.toml",
		"[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n")
	h.own(t)

	p := startProcWith(t, h.setup(h.home), h.sock, h.env, "run")
	sessions := map[string]struct{ dir, payload string }{
		"alpha": {filepath.Join(alpha, "src"), claudeSessionStart(t, filepath.Join(alpha, "src"), alphaT, "0b5c7e4e-alpha")},
		"beta":  {beta, codexSessionStart(t, beta, betaT)},
		"gamma": {gamma, claudeSessionStart(t, gamma, gammaT, "5d0e9f2a-gamma")},
	}
	for name, s := range sessions {
		code, out, errs := h.cli(t, s.dir, s.payload, "hook")
		if code != 0 {
			t.Fatalf("%s's SessionStart: exit %d %s", name, code, errs)
		}
		if ctx := sessionContext(t, out); !strings.Contains(ctx, "# Where "+name+" was") {
			t.Fatalf("%s's SessionStart is not answered by its own place: %q\nlog:\n%s", name, ctx, p.stderr)
		}
	}
	// The CLI, from inside each project (alpha from its subdirectory).
	for name, s := range sessions {
		if code, _, errs := h.cli(t, s.dir, "", "checkpoint", "--focus", name+"'s own focus"); code != 0 {
			t.Fatalf("checkpoint from %s: exit %d %s", s.dir, code, errs)
		}
	}
	for name, s := range sessions {
		code, out, errs := h.cli(t, s.dir, "", "resume", "--peek")
		if code != 0 || !strings.Contains(out, name+"'s own focus") {
			t.Fatalf("resume from %s: exit %d, %q %s", s.dir, code, out, errs)
		}
		for other := range sessions {
			if other != name && strings.Contains(out, other) {
				t.Errorf("resume from %s shows %s: %s", s.dir, other, out)
			}
		}
	}

	// Each transcript is followed by its own place.
	c := p.client()
	defer c.CloseIdleConnections()
	for name, want := range map[string]string{"alpha": alphaT, "beta": betaT, "gamma": gammaT} {
		var got string
		waitUntil(t, func() string { return fmt.Sprintf("%s to follow %s; it says %q", name, want, got) },
			func() bool { got = transcriptFollowed(t, c, name); return got == "ok: following "+want })
	}

	// Work lost in alpha: its resume names it and the command that
	// brings it back; the others' say nothing of it.
	waitUntil(t, func() string { return "alpha's start snapshot: " + p.stderr.String() },
		func() bool { return len(agentSnapshots(t, c, "alpha")) >= 1 })
	// A place is served before its tree is watched: wait for the watches.
	var watchState string
	waitUntil(t, func() string { return "alpha's tree watched: " + watchState },
		func() bool { watchState = component(t, c, "alpha", "watch"); return watchState == "ok: <nil>" })
	if err := os.Remove(filepath.Join(alpha, "src", "unsaved_alpha.go")); err != nil {
		t.Fatal(err)
	}
	// Waited for on resume's peek (a SessionStart each poll would be
	// activity, holding off the snapshot that finds the loss).
	var lost any
	waitUntil(t, func() string { return fmt.Sprintf("alpha's work lost: %v; log:\n%s", lost, p.stderr) }, func() bool {
		lost = get(t, c, "/v1/continuity?peek=1&local=1&agent=alpha")["work_lost"]
		return strings.Contains(mustJSON(t, lost), "unsaved_alpha.go")
	})
	_, out, _ := h.cli(t, sessions["alpha"].dir, sessions["alpha"].payload, "hook")
	if alphaCtx := sessionContext(t, out); !strings.Contains(alphaCtx, "unsaved_alpha.go") || !strings.Contains(alphaCtx, "continuityd snapshot restore") {
		t.Fatalf("alpha's SessionStart does not name its work lost: %q", alphaCtx)
	}
	for _, name := range []string{"beta", "gamma"} {
		_, out, _ := h.cli(t, sessions[name].dir, sessions[name].payload, "hook")
		ctx := sessionContext(t, out)
		if !strings.Contains(ctx, name+"'s own focus") || strings.Contains(ctx, "alpha") || strings.Contains(ctx, "unsaved_alpha.go") {
			t.Errorf("%s's SessionStart: %q", name, ctx)
		}
	}

	// A session in an unrelated directory: a short answer, nothing of any.
	code, out, errs := h.cli(t, elsewhere, claudeSessionStart(t, elsewhere, "", "9e1f-elsewhere"), "hook")
	ctx := sessionContext(t, out)
	if code != 0 || !strings.Contains(ctx, "lies in no place") {
		t.Fatalf("SessionStart in %s: exit %d %q %s", elsewhere, code, ctx, errs)
	}
	for _, leak := range []string{"alpha", "beta", "gamma", "focus", "snapshot restore"} {
		if strings.Contains(ctx, leak) || strings.Contains(errs, leak) {
			t.Errorf("the session in %s was told %q: %q %q", elsewhere, leak, ctx, errs)
		}
	}
	if placeStatus(t, p, "elsewhere") != nil {
		t.Errorf("%s was adopted", elsewhere)
	}
	// The CLI from there names the places and the flag.
	code, _, errs = h.cli(t, elsewhere, "", "resume")
	if code != 1 || !strings.Contains(errs, "--agent") || strings.Contains(errs, "?agent=") {
		t.Fatalf("resume from %s: exit %d %s", elsewhere, code, errs)
	}
	for name := range sessions {
		if !strings.Contains(errs, `"`+name+`"`) {
			t.Errorf("resume from %s does not name %s: %s", elsewhere, name, errs)
		}
	}
	if code, out, errs := h.cli(t, elsewhere, "", "resume", "--peek", "--agent", "beta"); code != 0 || !strings.Contains(out, "beta's own focus") {
		t.Errorf("--agent beta from %s: exit %d %q %s", elsewhere, code, out, errs)
	}
	// / and the home itself are never a place.
	for _, dir := range []string{h.home, "/"} {
		_, out, _ := h.cli(t, elsewhere, claudeSessionStart(t, dir, "", "home"), "hook")
		if ctx := sessionContext(t, out); !strings.Contains(ctx, "lies in no place") {
			t.Errorf("a session in %s: %q", dir, ctx)
		}
	}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		if st := placeStatus(t, p, name); st == nil || st["watched"] != true {
			t.Errorf("status lists %s as %v", name, st)
		}
	}
	if st := get(t, c, "/v1/status"); st["watches"] == nil {
		t.Errorf("status does not say the inotify watches in use: %v", st)
	}
}

// quickPolicy is a user config file without [[agent]] whose snapshots
// follow a change within a second.
const quickPolicy = "[watch]\nquiet = \"100ms\"\n\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n"

// TestPlaceConfiguredByNameKeepsHistory: a place adopted from a session,
// with a goal, a decision and snapshots, then configured by name in the
// user's config file (the daemon reloads it): the configured agent has
// the place's resume, snapshots and history, the place is gone with
// nothing left behind, and status says where its state went.
func TestPlaceConfiguredByNameKeepsHistory(t *testing.T) {
	h := newPlacesHome(t)
	proj := filepath.Join(h.home, "delta")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	userGit(t, proj, "init", "-q", "-b", "main")
	writeFile(t, proj, "main.go", "package main\n")
	cfgDir := filepath.Join(h.home, ".config", "continuityd")
	writeFile(t, cfgDir, "continuityd.toml", quickPolicy)
	h.own(t)
	p := startProcWith(t, h.setup(h.home), h.sock, h.env, "run")
	c := p.client()
	defer c.CloseIdleConnections()

	if code, out, errs := h.cli(t, proj, claudeSessionStart(t, proj, "", "s-delta"), "hook"); code != 0 || !strings.Contains(sessionContext(t, out), "# Where delta was") {
		t.Fatalf("delta's SessionStart: %d %q %s", code, out, errs)
	}
	if code, _, errs := h.cli(t, proj, "", "checkpoint", "--focus", "delta's goal", "--decide", "keep the parser", "--because", "the rewrite loses the error positions"); code != 0 {
		t.Fatalf("checkpoint: %d %s", code, errs)
	}
	var watchState string
	waitUntil(t, func() string { return "delta's tree watched: " + watchState },
		func() bool { watchState = component(t, c, "delta", "watch"); return watchState == "ok: <nil>" })
	writeFile(t, proj, "main.go", "package main // changed\n")
	var before []string
	waitUntil(t, func() string { return fmt.Sprintf("delta's snapshots %v; log:\n%s", before, p.stderr) },
		func() bool { before = agentSnapshots(t, c, "delta"); return len(before) >= 2 })

	// Configured by name, in the file `run` reads: the daemon reloads it.
	h.write(t, filepath.Join(cfgDir, "continuityd.toml"), quickPolicy+fmt.Sprintf("\n[[agent]]\nname = \"myproject\"\nworkdir = %q\n", proj))
	var res map[string]any
	waitUntil(t, func() string { return fmt.Sprintf("myproject's resume %v; log:\n%s", res, p.stderr) }, func() bool {
		res = get(t, c, "/v1/continuity?peek=1&local=1&agent=myproject")
		return res["focus"] == "delta's goal"
	})
	if !strings.Contains(mustJSON(t, res["decisions"]), "keep the parser") {
		t.Errorf("myproject's decisions: %v", res["decisions"])
	}
	after := agentSnapshots(t, c, "myproject")
	for _, id := range before {
		if !slices.Contains(after, id) {
			t.Errorf("snapshot %s of the place is not myproject's: %v", id, after)
		}
	}
	// The CLI in the project acts on it, by its new name.
	if code, out, errs := h.cli(t, proj, "", "resume", "--peek"); code != 0 || !strings.Contains(out, "# Where myproject was") || !strings.Contains(out, "delta's goal") {
		t.Errorf("resume in %s: %d %q %s", proj, code, out, errs)
	}
	st := get(t, c, "/v1/status")
	if placeStatus(t, p, "delta") != nil {
		t.Errorf("delta is still a place: %v", st["places"])
	}
	if moved := mustJSON(t, st["moved"]); !strings.Contains(moved, `"from":"delta"`) || !strings.Contains(moved, `"to":"myproject"`) {
		t.Errorf("status does not say where delta's state went: %v", st["moved"])
	}
	if code, out, _ := h.cli(t, proj, "", "status"); code != 0 || !strings.Contains(out, "delta is now myproject") {
		t.Errorf("status does not say where delta's state went: %d %s", code, out)
	}
	state := filepath.Join(h.home, ".local", "state", "continuityd", "agents")
	if _, err := os.Stat(filepath.Join(state, "delta")); err == nil {
		t.Errorf("the place's state directory is left behind in %s", state)
	}
}

// write replaces a file the home's user owns.
func (h *placesHome) write(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if h.cred != nil {
		os.Lchown(tmp, daemonID, daemonID)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestPlaceIdleUnwatchedThenCaughtUp: a place with no session for
// idle_after (the test hook sets a second) is unwatched, its state kept;
// files changed meanwhile are found at its next session, by comparing
// with its last snapshot, reported as outside and snapshotted.
func TestPlaceIdleUnwatchedThenCaughtUp(t *testing.T) {
	h := newPlacesHome(t)
	proj := filepath.Join(h.home, "epsilon")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, proj, "notes.md", "first\n")
	writeFile(t, filepath.Join(h.home, ".config", "continuityd"), "continuityd.toml", quickPolicy)
	h.own(t)
	p := startProcWith(t, h.setup(h.home), h.sock, append(h.env, "CONTINUITYD_TEST_IDLE_AFTER=1s"), "run")
	c := p.client()
	defer c.CloseIdleConnections()
	if code, out, errs := h.cli(t, proj, claudeSessionStart(t, proj, "", "s-eps"), "hook"); code != 0 || !strings.Contains(sessionContext(t, out), "# Where epsilon was") {
		t.Fatalf("epsilon's SessionStart: %d %q %s", code, out, errs)
	}
	var ids []string
	waitUntil(t, func() string { return "epsilon's start snapshot; log:\n" + p.stderr.String() },
		func() bool { ids = agentSnapshots(t, c, "epsilon"); return len(ids) >= 1 })
	waitUntil(t, func() string {
		return fmt.Sprintf("epsilon unwatched: %v; log:\n%s", placeStatus(t, p, "epsilon"), p.stderr)
	},
		func() bool { st := placeStatus(t, p, "epsilon"); return st != nil && st["watched"] == false })

	if code, out, _ := h.cli(t, proj, "", "status"); code != 0 || !strings.Contains(out, "unwatched (idle") || !strings.Contains(out, "inotify watches:") {
		t.Errorf("status of the unwatched place: %d %s", code, out)
	}
	// Changed while nobody watched.
	writeFile(t, proj, "notes.md", "changed while unwatched\n")
	writeFile(t, proj, "added.md", "new while unwatched\n")
	if code, out, errs := h.cli(t, proj, claudeSessionStart(t, proj, "", "s-eps-2"), "hook"); code != 0 || !strings.Contains(sessionContext(t, out), "# Where epsilon was") {
		t.Fatalf("epsilon's next SessionStart: %d %q %s", code, out, errs)
	}
	var got []string
	waitUntil(t, func() string { return fmt.Sprintf("epsilon's by_others %v; log:\n%s", got, p.stderr) },
		func() bool {
			got = byOthers(t, c, "epsilon")
			return hasAll(got, "notes.md outside", "added.md outside")
		})
	var now []string
	waitUntil(t, func() string { return fmt.Sprintf("a snapshot of the changes: %v after %v", now, ids) },
		func() bool { now = agentSnapshots(t, c, "epsilon"); return len(now) > len(ids) })
	code, out, errs := h.cli(t, proj, "", "snapshot", "show", now[0])
	if code != 0 || !strings.Contains(out, "notes.md") || !strings.Contains(out, "added.md") {
		t.Errorf("the newest snapshot %s: %d %q %s", now[0], code, out, errs)
	}
	// Unwatched again, then named with --agent: watched for the call.
	waitUntil(t, func() string { return "epsilon unwatched again; log:\n" + p.stderr.String() },
		func() bool { st := placeStatus(t, p, "epsilon"); return st != nil && st["watched"] == false })
	if code, out, errs := h.cli(t, h.top, "", "resume", "--peek", "--agent", "epsilon"); code != 0 || !strings.Contains(out, "# Where epsilon was") {
		t.Errorf("resume --agent epsilon while unwatched: %d %q %s", code, out, errs)
	}
}

// TestRootServiceAdoptsOnlyTheCallersOwn: a daemon running as root (a
// system service, its socket open to everyone) adopts a project for the
// peer that owns it, and refuses a peer adopting a directory it does not
// own: the SessionStart says so and the directory is no place.
func TestRootServiceAdoptsOnlyTheCallersOwn(t *testing.T) {
	top := usersTop(t, "cdrootplaces", "projects", "projects/zeta")
	zeta := filepath.Join(top, "projects", "zeta")
	writeFile(t, zeta, "z.go", "package zeta\n")
	os.Chown(filepath.Join(zeta, "z.go"), daemonID, daemonID)
	state, socket := filepath.Join(top, "state"), filepath.Join(top, "d.sock")
	cfg := filepath.Join(top, "continuityd.toml")
	writeFile(t, top, "continuityd.toml", fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nsocket_mode = \"0666\"\n\n[places]\nroots = [%q]\n",
		state, socket, filepath.Join(top, "projects")))
	// Started in /, as a system service is: it serves places only.
	p := startProcIn(t, "/", socket, nil, "run", "--config", cfg)
	env := []string{"CONTINUITYD_SOCKET=" + socket, "HOME=" + top}

	// Another user's project: refused.
	code, out, errs := runAs(t, asOutsider, env, claudeSessionStart(t, zeta, "", "s-outsider"), "hook")
	ctx := sessionContext(t, out)
	if code != 0 || !strings.Contains(ctx, "not the caller's") || strings.Contains(ctx, "# Where") {
		t.Fatalf("an outsider's session in %s: %d %q %s", zeta, code, ctx, errs)
	}
	if placeStatus(t, p, "zeta") != nil {
		t.Fatalf("%s was adopted for a user who does not own it", zeta)
	}
	// Its owner's session adopts it.
	code, out, errs = runAs(t, asDaemon, env, claudeSessionStart(t, zeta, "", "s-owner"), "hook")
	if ctx := sessionContext(t, out); code != 0 || !strings.Contains(ctx, "# Where zeta was") {
		t.Fatalf("the owner's session in %s: %d %q %s", zeta, code, ctx, errs)
	}
	// Now a place, it is still not the outsider's.
	code, out, _ = runAs(t, asOutsider, env, claudeSessionStart(t, zeta, "", "s-outsider-2"), "hook")
	if ctx := sessionContext(t, out); code != 0 || strings.Contains(ctx, "# Where zeta was") {
		t.Fatalf("an outsider's session in the place %s: %q", zeta, ctx)
	}
}
