package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// journalRandomSteps is how many random steps TestJournalRandom takes;
// the journal_long build tag (journal_long_test.go) takes more.
var journalRandomSteps = 14

// journalStood is one version that stood: what history must list and
// restore --at must bring back.
type journalStood struct {
	path, content, by string
	at                time.Time
}

// TestJournalRandom: a seeded random sequence of edits by the agent
// (PostToolUse Write), by its shell (a Bash tool window) and by a person,
// renames, deletes and discards (git checkout, reset --hard, stash -u,
// rm): every version that stood (the test waits until history lists it,
// so each stood past the settle window and the durability delay) is
// listed with the right by, and `snapshot restore --path P --at T`
// brings it back byte-identical. The seed is logged; CONTINUITYD_SEED
// replays one.
func TestJournalRandom(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CONTINUITYD_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (CONTINUITYD_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	w, work := journalWorkspace(t, "1s")
	env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
	files := []string{"a.go", "b.go", "pkg/c.go"}
	for _, f := range files {
		writeFile(t, work, f, "// "+f+" committed\n")
	}
	userGit(t, work, "init", "-q", "-b", "main")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-q", "-m", "first")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")

	var stood []journalStood
	// saw waits until history lists content for rel (by "" : anyone) and
	// records it.
	saw := func(rel, content, by string) {
		t.Helper()
		v := waitVersion(t, env, work, rel, content, by)
		stood = append(stood, journalStood{rel, content, v.By, v.At})
	}
	shell := func(event, id string) {
		t.Helper()
		payload := hookPayload(t, "input-pretooluse-common-fields.json", func(m map[string]any) {
			m["cwd"], m["hook_event_name"], m["tool_use_id"] = work, event, id
		})
		if code, out, errs := cli(t, env, payload, "hook"); code != 0 || out != "" {
			t.Fatalf("hook %s: exit %d, out %q, err %s", event, code, out, errs)
		}
	}
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(work, rel))
		return err == nil
	}
	headContent := func(rel string) string { return "// " + rel + " committed\n" }
	// The ledger credits a change to the agent whose claim on the path,
	// or whose shell window, lies within its slack (5 s): a person's edit
	// is expected to be outside only past it.
	lastAgent := map[string]time.Time{}
	var lastShell time.Time
	const slack = 6 * time.Second
	person := func(rel string) string {
		if time.Since(lastAgent[rel]) > slack && time.Since(lastShell) > slack {
			return "outside"
		}
		return ""
	}
	stop := hookPayload(t, "input-stop.json", func(m map[string]any) { m["cwd"] = work })
	for step := range journalRandomSteps {
		rel := files[rng.IntN(len(files))]
		content := fmt.Sprintf("// %s step %d seed %d\n%s", rel, step, seed, string(rune('a'+rng.IntN(26))))
		switch k := rng.IntN(9); k {
		case 0, 1:
			agentEdit(t, env, work, rel, content)
			lastAgent[rel] = time.Now()
			saw(rel, content, "agent")
		case 2:
			id := fmt.Sprintf("toolu_shell_%d", step)
			shell("PreToolUse", id)
			writeFile(t, work, rel, content)
			saw(rel, content, "agent")
			shell("PostToolUse", id)
			// The agent stops: its shell window ends for certain.
			if code, out, errs := cli(t, env, stop, "hook"); code != 0 {
				t.Fatalf("Stop hook: exit %d, out %q, err %s", code, out, errs)
			}
			lastShell = time.Now()
		case 3, 4:
			by := person(rel)
			writeFile(t, work, rel, content)
			saw(rel, content, by)
		case 5: // rename
			to := rel + ".moved"
			if !exists(rel) {
				continue
			}
			moved := readFile(t, work, rel)
			if err := os.Rename(filepath.Join(work, rel), filepath.Join(work, to)); err != nil {
				t.Fatal(err)
			}
			saw(to, moved, "")
			if err := os.Rename(filepath.Join(work, to), filepath.Join(work, rel)); err != nil {
				t.Fatal(err)
			}
			saw(rel, moved, "")
		case 6: // rm (a file the journal never held leaves no version when it goes)
			if exists(rel) && len(history(t, env, work, rel).Versions) > 0 {
				if err := os.Remove(filepath.Join(work, rel)); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, func() string { return rel + "'s deletion in its history" }, func() bool {
					h := history(t, env, work, rel)
					return len(h.Versions) > 0 && h.Versions[len(h.Versions)-1].Gone
				})
			}
		default: // a discard: everything back to HEAD
			discard := [][]string{{"checkout", "--", "."}, {"reset", "-q", "--hard"}, {"stash", "-u", "-q"}}[rng.IntN(3)]
			var changed []string
			for _, f := range files {
				if got, err := os.ReadFile(filepath.Join(work, f)); err != nil || string(got) != headContent(f) {
					changed = append(changed, f)
				}
			}
			userGit(t, work, discard...)
			for _, f := range changed {
				saw(f, headContent(f), "")
			}
		}
	}
	// Every version that stood comes back byte-identical by its time.
	for i, s := range stood {
		at := s.at.UTC().Format(time.RFC3339Nano)
		code, out, errOut := cli(t, env, "", "snapshot", "restore", "--path", filepath.Join(work, s.path), "--at", at)
		if code != 0 {
			t.Fatalf("seed %d, version %d (%s at %s): exit %d %s %s", seed, i, s.path, at, code, out, errOut)
		}
		if got := readFile(t, work, s.path); got != s.content {
			t.Fatalf("seed %d: restore --path %s --at %s gave %q, want %q", seed, s.path, at, got, s.content)
		}
	}
}
