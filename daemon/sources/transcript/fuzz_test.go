package transcript

import (
	"bytes"
	"math"
	"testing"
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
			if s.Compactions != compactions {
				t.Fatalf("Compactions = %d, saw %d", s.Compactions, compactions)
			}
			if (s.Usage == nil) != (last == nil) || s.Usage != nil && *s.Usage != *last {
				t.Fatalf("state usage %+v, last update %+v", s.Usage, last)
			}
		}
	})
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
	a.Usage, b.Usage, a.LastCompaction, b.LastCompaction = nil, nil, nil, nil
	return a == b
}
