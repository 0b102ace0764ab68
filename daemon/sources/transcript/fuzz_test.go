package transcript

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/toolpaths"
)

// FuzzTrackerLine feeds every line of the input to one Tracker, in the
// format the bool picks, and checks after each line that the tracker holds
// only sane numbers and markers. Seeds, mostly excerpts of the real
// fixtures, are in testdata/fuzz/FuzzTrackerLine/.
//
// The properties: Line never panics; an error leaves the state alone but
// for the counters; every Usage has non-negative numbers and a Fraction in
// [0, 1] when the window is known, 0 when it is not; triggers are markers;
// identifiers pass their shape checks; the state agrees with the updates.
func FuzzTrackerLine(f *testing.F) {
	f.Add(false, []byte(`{"type":"assistant","message":{"id":"m","usage":{"input_tokens":1}}}`))
	f.Add(false, []byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/w/a"}}]}}`+"\n"+`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1"}]}}`))
	f.Add(true, []byte(`{"type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Update File: a\n*** Move to: b"}}`))
	f.Add(true, []byte(`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":1},"model_context_window":2}}}`))
	f.Fuzz(func(t *testing.T, codex bool, data []byte) {
		format := ClaudeCode
		if codex {
			format = Codex
		}
		tr := NewTracker(format)
		var (
			calls       int64
			compactions int
			last        *Usage // the usage the state should hold
		)
		for _, line := range bytes.Split(data, []byte{'\n'}) {
			DetectFormat(line)
			before := tr.State()
			u, err := tr.Line(line)
			calls++
			s := tr.State()
			if s.Lines != calls {
				t.Fatalf("Lines = %d after %d calls", s.Lines, calls)
			}
			if err != nil {
				if u != (Update{}) {
					t.Fatalf("an error and an update: %+v", u)
				}
				s.Lines, s.Malformed = before.Lines, before.Malformed
				if !sameState(s, before) {
					t.Fatalf("a malformed line changed the state:\n%+v\n%+v", before, s)
				}
				continue
			}
			if u.Usage != nil && u.Compaction != nil {
				t.Fatalf("usage and compaction from one line: %+v", u)
			}
			if u.Usage != nil {
				checkUsage(t, *u.Usage)
				v := *u.Usage
				last = &v
			}
			if c := u.Compaction; c != nil {
				compactions++
				last = nil
				if c.Trigger != "" && c.Trigger != "manual" && c.Trigger != "auto" {
					t.Fatalf("trigger %q", c.Trigger)
				}
				if c.PreTokens < 0 || c.PostTokens < 0 {
					t.Fatalf("compaction %+v", c)
				}
			}
			if u.SessionID != "" && (!validSessionID(u.SessionID) || u.SessionID != s.SessionID) {
				t.Fatalf("session id %q (state %q)", u.SessionID, s.SessionID)
			}
			if u.Cwd != "" && (!validCwd(u.Cwd) || u.Cwd != s.Cwd) {
				t.Fatalf("cwd %q (state %q)", u.Cwd, s.Cwd)
			}
			if u.Tools != nil {
				checkTools(t, u.Tools)
			}
			if s.Compactions != compactions {
				t.Fatalf("Compactions = %d, saw %d", s.Compactions, compactions)
			}
			if (s.Usage == nil) != (last == nil) || s.Usage != nil && *s.Usage != *last {
				t.Fatalf("state usage %+v, last update %+v", s.Usage, last)
			}
		}
	})
}

// checkTools: every path a tool call claims passed the shape check, and a
// refusal shows no raw control character.
func checkTools(t *testing.T, tc *ToolCalls) {
	t.Helper()
	for _, e := range tc.Edits {
		if len(e.Paths) > toolpaths.MaxPathsPerCall {
			t.Fatalf("%d paths in one edit", len(e.Paths))
		}
		for _, p := range e.Paths {
			if err := toolpaths.CheckPath(p); err != nil {
				t.Fatalf("edit path %q: %v", p, err)
			}
		}
		for _, r := range e.Refused {
			if strings.IndexFunc(r, unicode.IsControl) >= 0 {
				t.Fatalf("refusal with a control character: %q", r)
			}
		}
	}
}

func checkUsage(t *testing.T, u Usage) {
	t.Helper()
	if u.Tokens < 0 || u.Window < 0 || math.IsNaN(u.Fraction) {
		t.Fatalf("usage %+v", u)
	}
	if u.Window > 0 && (u.Fraction < 0 || u.Fraction > 1) {
		t.Fatalf("fraction out of [0, 1]: %+v", u)
	}
	if u.Window == 0 && u.Fraction != 0 {
		t.Fatalf("fraction without a window: %+v", u)
	}
}

func sameState(a, b State) bool {
	if (a.Usage == nil) != (b.Usage == nil) || a.Usage != nil && *a.Usage != *b.Usage {
		return false
	}
	if (a.LastCompaction == nil) != (b.LastCompaction == nil) || a.LastCompaction != nil && *a.LastCompaction != *b.LastCompaction {
		return false
	}
	if (a.Plan == nil) != (b.Plan == nil) || a.Plan != nil && !slices.Equal(a.Plan.Steps, b.Plan.Steps) {
		return false
	}
	a.Usage, b.Usage, a.LastCompaction, b.LastCompaction, a.Plan, b.Plan = nil, nil, nil, nil, nil, nil
	return a == b
}

// FuzzTrackerPlan feeds every line of the input to one Tracker and checks
// the plan after each line. The seeds are the real plan fixtures, whole
// (testdata/plans/*.jsonl), plus the short shapes below.
//
// The properties: Line never panics; a malformed line leaves the plan
// alone; every plan reported is bounded, each step one non-empty line of
// valid UTF-8 within capsule.MaxPlanStep characters with a known status;
// the state holds the last plan reported.
func FuzzTrackerPlan(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "plans", "*.jsonl"))
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(strings.HasPrefix(filepath.Base(n), "codex-"), data)
	}
	f.Add(false, []byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"TodoWrite","input":{"todos":[{"content":"x","status":"pending"}]}}]}}`+"\n"+
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":"Task #1 created"}]},"toolUseResult":{"task":{"id":1,"subject":"y"}}}`))
	f.Add(false, []byte(`{"type":"attachment","attachment":{"type":"task_reminder","content":[{"id":"1","subject":"s","status":"in_progress"}]}}`))
	f.Add(true, []byte(`{"type":"response_item","payload":{"type":"function_call","name":"update_plan","arguments":"{\"plan\":[{\"step\":\"s\",\"status\":\"completed\"}]}"}}`))
	f.Fuzz(func(t *testing.T, codex bool, data []byte) {
		format := ClaudeCode
		if codex {
			format = Codex
		}
		tr := NewTracker(format)
		var last *Plan
		for _, line := range bytes.Split(data, []byte{'\n'}) {
			before := tr.State().Plan
			u, err := tr.Line(line)
			s := tr.State()
			if err != nil {
				if u.Plan != nil || (before == nil) != (s.Plan == nil) || before != nil && !slices.Equal(before.Steps, s.Plan.Steps) {
					t.Fatalf("a malformed line changed the plan: %+v → %+v", before, s.Plan)
				}
				continue
			}
			if u.Plan != nil {
				checkPlan(t, u.Plan.Steps)
				if last != nil && slices.Equal(last.Steps, u.Plan.Steps) {
					t.Fatalf("the same plan reported twice: %+v", u.Plan.Steps)
				}
				last = u.Plan
			}
			if (s.Plan == nil) != (last == nil) || last != nil && !slices.Equal(s.Plan.Steps, last.Steps) {
				t.Fatalf("state plan %+v, last reported %+v", s.Plan, last)
			}
		}
	})
}

func checkPlan(t *testing.T, steps []capsule.PlanStep) {
	t.Helper()
	if len(steps) > capsule.MaxPlanSteps {
		t.Fatalf("%d steps", len(steps))
	}
	for _, s := range steps {
		if !capsule.ValidPlanStatus(s.Status) {
			t.Fatalf("status %q", s.Status)
		}
		if s.Step == "" || s.Step != strings.TrimSpace(s.Step) || !utf8.ValidString(s.Step) || utf8.RuneCountInString(s.Step) > capsule.MaxPlanStep {
			t.Fatalf("step %q", s.Step)
		}
		if strings.ContainsFunc(s.Step, func(r rune) bool { return unicode.IsControl(r) || r == '\n' }) {
			t.Fatalf("step with a control character: %q", s.Step)
		}
	}
}
