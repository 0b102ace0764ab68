package capture

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// transcriptData is the transcript package's real fixtures (NOTE.md there
// says where each comes from).
var transcriptData = filepath.Join("..", "sources", "transcript", "testdata")

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(transcriptData, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// transcriptOptions follow Claude Code transcripts under a fresh home (the
// workdir not watched, so only the follower writes); it returns the
// workdir's project folder there, not made yet.
func transcriptOptions(t *testing.T) (Options, string) {
	o := testOptions(t)
	o.Watch.Enabled = false
	home := filepath.Join(t.TempDir(), "claude")
	o.Transcripts = TranscriptOptions{Enabled: true, ClaudeHome: home}
	return o, transcript.ClaudeProjectDir(home, o.Workdir)
}

// autocompact is the Claude Code transcript with an automatic compaction,
// split at its compact boundary, and the context used fraction each part
// ends with (computed independently of the follower).
func autocompact(t *testing.T) (before, after string, usedBefore, usedAfter float64) {
	lines := strings.SplitAfter(string(readFixture(t, "transcript-autocompact-opus46-v2.1.39.jsonl")), "\n")
	boundary := 62 // line 63 is the compact_boundary
	if !strings.Contains(lines[boundary], "compact_boundary") {
		t.Fatal("fixture changed: line 63 is not the compact boundary")
	}
	tr := transcript.NewTracker(transcript.ClaudeCode)
	last := func(ls []string) (f float64) {
		for _, l := range ls {
			if u, _ := tr.Line([]byte(l)); u.Usage != nil {
				f = u.Usage.Fraction
			}
		}
		return f
	}
	usedBefore, usedAfter = last(lines[:boundary]), last(lines[boundary:])
	if usedBefore == 0 || usedAfter == 0 {
		t.Fatal("fixture changed: no usage on one side of the compact boundary")
	}
	return strings.Join(lines[:boundary], ""), strings.Join(lines[boundary:], ""), usedBefore, usedAfter
}

// usedNear accepts a resume whose context used fraction is within a point
// of want.
func usedNear(want float64) func(capsule.Resume) bool {
	return func(r capsule.Resume) bool {
		return r.Context.UsedFraction != nil && math.Abs(*r.Context.UsedFraction-want) <= 0.01
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestTranscriptFollowedForUsageAndCompaction: a real Claude Code
// transcript grows in the agent's project folder; the follower reports
// the used fraction it implies, and counts a compaction written while it
// follows once, never one read from history.
func TestTranscriptFollowedForUsageAndCompaction(t *testing.T) {
	before, after, usedBefore, usedAfter := autocompact(t)
	o, proj := transcriptOptions(t)
	path := filepath.Join(proj, "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, path, before)
	r := startCapture(t, o)
	got := waitResume(t, r.store, "the history's used fraction", usedNear(usedBefore))
	if got.Context.Compactions != 0 {
		t.Fatalf("history counted as compactions: %d", got.Context.Compactions)
	}
	appendFile(t, path, after)
	got = waitResume(t, r.store, "the compaction and the last usage", func(res capsule.Resume) bool {
		return res.Context.Compactions >= 1 && usedNear(usedAfter)(res)
	})
	if got.Context.Compactions != 1 {
		t.Fatalf("compactions %d, want exactly 1", got.Context.Compactions)
	}
}

// TestTranscriptHistoryIsNotNews: a transcript already there when
// following begins is history: its usage is the context now, but its
// compaction happened before and is not counted.
func TestTranscriptHistoryIsNotNews(t *testing.T) {
	before, after, _, usedAfter := autocompact(t)
	o, proj := transcriptOptions(t)
	writeFile(t, filepath.Join(proj, "258c7280-ae70-4798-800f-63464d01a85d.jsonl"), before+after)
	r := startCapture(t, o)
	got := waitResume(t, r.store, "the history's used fraction", usedNear(usedAfter))
	if got.Context.Compactions != 0 {
		t.Fatalf("a compaction read from history counted: %d", got.Context.Compactions)
	}
}

// TestTranscriptOffsetSurvivesARestart: where the transcript was read up
// to is kept in the agent's state directory, so what was written while the
// daemon was down is read as news after the restart (its compaction
// counts), not taken for history.
func TestTranscriptOffsetSurvivesARestart(t *testing.T) {
	before, after, usedBefore, usedAfter := autocompact(t)
	o, proj := transcriptOptions(t)
	path := filepath.Join(proj, "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
	writeFile(t, path, before)
	r := startCapture(t, o)
	waitResume(t, r.store, "the history's used fraction", usedNear(usedBefore))
	r.stop()

	// The offset saved is the end of what was read, with the file's inode.
	raw, err := os.ReadFile(filepath.Join(o.Dir, offsetsFile))
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]savedOffset
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatalf("%s: %v", offsetsFile, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := saved[path]; !ok || s.Offset != fi.Size() || s.Inode != fi.Sys().(*syscall.Stat_t).Ino {
		t.Fatalf("saved offsets %+v: want %s at %d (inode %d)", saved, path, fi.Size(), fi.Sys().(*syscall.Stat_t).Ino)
	}

	appendFile(t, path, after) // while the daemon is down
	r = startCapture(t, o)
	got := waitResume(t, r.store, "the compaction written while down", func(res capsule.Resume) bool {
		return res.Context.Compactions >= 1 && usedNear(usedAfter)(res)
	})
	if got.Context.Compactions != 1 {
		t.Fatalf("compactions %d, want exactly 1", got.Context.Compactions)
	}
}

// TestTranscriptOnlyFromItsHomes: a hook names the transcript, so the
// follower reads only .jsonl files under a configured home.
func TestTranscriptOnlyFromItsHomes(t *testing.T) {
	o := testOptions(t)
	o.Transcripts = TranscriptOptions{Enabled: true, ClaudeHome: "/home/u/.claude", CodexHome: "/home/u/.codex/"}
	f := newCapture(t, o).transcripts
	for path, want := range map[string]bool{
		"/home/u/.claude/projects/-work/s.jsonl":          true,
		"/home/u/.codex/sessions/2026/05/11/r.jsonl":      true,
		"/home/u/.claude/projects/../../../etc/x.jsonl":   false,
		"/home/u/.claude-other/projects/-work/s.jsonl":    false,
		"/home/u/.claude/projects/-work/s.json":           false,
		"/tmp/s.jsonl":                                    false,
		"/home/u/.claude":                                 false,
		"/home/u/.codex/sessions/2026/05/11/r.jsonl.gone": false,
	} {
		if got := f.allowed(path); got != want {
			t.Errorf("allowed(%q) = %v, want %v", path, got, want)
		}
	}
}

// waitHealth polls the transcripts component until it reads want.
func waitHealth(t *testing.T, c *Capture, want string) {
	t.Helper()
	var got string
	testwait.Until(t, func() string { return fmt.Sprintf("transcripts component %q, want %q", got, want) }, func() bool {
		h := c.transcripts.health()
		got = h.State + ": " + h.Detail
		return got == want
	})
}

// planSample is a real transcript that states a plan, and that plan.
func planSample(t *testing.T, name string) ([]byte, []capsule.PlanStep) {
	t.Helper()
	raw := readFixture(t, filepath.Join("plans", name+".jsonl"))
	var plan []capsule.PlanStep
	if err := json.Unmarshal(readFixture(t, filepath.Join("plans", name+".golden.json")), &plan); err != nil {
		t.Fatal(err)
	}
	return raw, plan
}

// TestTranscriptPlanAndNewSession: the workdir's Claude Code transcript is
// followed; a session started after the capture (a new transcript in the
// project folder, no hook) becomes the followed one, and the plan its
// TodoWrite calls state is stored, with the step in progress as the next
// action the agent had not written itself.
func TestTranscriptPlanAndNewSession(t *testing.T) {
	oldRaw, oldPlan := planSample(t, "claude-todowrite-v2.0.76-entireio-cli")
	newRaw, newPlan := planSample(t, "claude-todowrite-v2.0.14-jnarowski-agentcmd") // ends with a step in progress
	o, proj := transcriptOptions(t)
	writeFile(t, filepath.Join(proj, "00000000-0000-4000-8000-000000000001.jsonl"), string(oldRaw))
	r := startCapture(t, o)
	// The transcript there at the start is followed: its plan is the plan
	// now, though read from history; history sets no working state.
	got := waitResume(t, r.store, "the first session's plan", func(res capsule.Resume) bool { return slices.Equal(res.Plan, oldPlan) })
	if got.WorkingState != nil {
		t.Fatalf("a plan read from history set the working state: %+v", got.WorkingState)
	}
	writeFile(t, filepath.Join(proj, "00000000-0000-4000-8000-000000000002.jsonl"), string(newRaw))
	waitResume(t, r.store, "the new session's plan", func(res capsule.Resume) bool { return slices.Equal(res.Plan, newPlan) })
	cur, ok := capsule.CurrentPlanStep(newPlan)
	if !ok {
		t.Fatal("the sample's plan has no step in progress")
	}
	waitResume(t, r.store, "the step in progress as the next action", func(res capsule.Resume) bool {
		return res.WorkingState != nil && res.WorkingState.NextAction == cur.Step
	})
}

// TestTranscriptNewProjectFolderFollowedByWatch: a Claude Code session
// started after the capture, in a project Claude Code had never seen (its
// project folder does not exist yet), is followed because the folders are
// watched: there is no rescan, so only the watch can find it.
func TestTranscriptNewProjectFolderFollowedByWatch(t *testing.T) {
	raw, want := planSample(t, "claude-todowrite-v2.0.14-jnarowski-agentcmd")
	o, proj := transcriptOptions(t)
	if err := os.MkdirAll(o.Transcripts.ClaudeHome, 0o700); err != nil { // installed, no projects folder yet
		t.Fatal(err)
	}
	r := startCapture(t, o)
	// The follower has looked once and is waiting: what appears now can
	// only be found by a watch.
	waitHealth(t, r.Capture, "ok: no session yet; watching "+proj)
	session := filepath.Join(proj, "00000000-0000-4000-8000-000000000003.jsonl")
	writeFile(t, session, string(raw))
	waitResume(t, r.store, "the new session's plan", func(res capsule.Resume) bool { return slices.Equal(res.Plan, want) })
	waitHealth(t, r.Capture, "ok: following "+session)
}

// TestCodexRolloutFollowedByWatch: a Codex rollout whose first line was
// not whole when the follower looked (Codex writes session_meta in pieces)
// is followed once the line is complete: the write, with no rescan, makes
// the follower look again (no new file appears). The fixture is a real
// rollout, its cwd set to the workdir.
func TestCodexRolloutFollowedByWatch(t *testing.T) {
	first, rest, _ := strings.Cut(string(readFixture(t, "rollout-2026-05-11-v0.125.0-token-count.jsonl")), "\n")
	o := testOptions(t)
	o.Watch.Enabled = false
	codex := filepath.Join(t.TempDir(), "codex")
	o.Transcripts = TranscriptOptions{Enabled: true, CodexHome: codex}
	var meta map[string]any
	if err := json.Unmarshal([]byte(first), &meta); err != nil {
		t.Fatal(err)
	}
	meta["payload"].(map[string]any)["cwd"] = o.Workdir
	line, _ := json.Marshal(meta)

	now := time.Now()
	rollout := filepath.Join(codex, "sessions", now.Format("2006"), now.Format("01"), now.Format("02"),
		"rollout-2026-05-11T08-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl")
	half := len(line) / 2
	writeFile(t, rollout, string(line[:half]))
	r := startCapture(t, o)
	// The first scan is done: it saw the rollout, whose first line is not
	// whole, so it does not know whose session it is yet.
	var h Component
	testwait.Until(t, func() string { return fmt.Sprintf("transcripts component %+v, want no session yet", h) }, func() bool {
		h = r.transcripts.health()
		return strings.HasPrefix(h.Detail, "no session yet")
	})
	appendFile(t, rollout, string(line[half:])+"\n"+rest)
	waitHealth(t, r.Capture, "ok: following "+rollout)
	waitResume(t, r.store, "the rollout's usage", func(res capsule.Resume) bool {
		return res.Context.UsedFraction != nil && *res.Context.UsedFraction > 0
	})
}
