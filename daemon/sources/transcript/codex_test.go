package transcript

import (
	"math"
	"testing"
)

const (
	codex104 = "rollout-2026-02-23-v0.104.0-alpha.1-autocompact-sanitized.jsonl"
	codex125 = "rollout-2026-05-11-v0.125.0-token-count.jsonl"
	codexCat = "rollout-schema-catalog-v0.146.0-agent-sessions.jsonl"
)

func TestCodexAutocompact104(t *testing.T) {
	r := feedFile(t, Codex, codex104)
	// One top-level "compacted" line; its context_compacted event and the
	// all-zero token_count events around it add nothing.
	if len(r.compactions) != 1 {
		t.Fatalf("compactions = %+v, want 1", r.compactions)
	}
	if c := r.compactions[0]; c != (Compaction{PreTokens: 209950}) {
		t.Errorf("compaction = %+v, want PreTokens 209950 and no trigger", c)
	}
	want := []int64{
		17088, 191904, 197420, 198195, 197926, 200028, 207226, 208486, 209030, 209950,
		-1,
		48297, 51549, 54634, 57807, 162544, 162073,
	}
	if !equalInts(r.tokens, want) {
		t.Fatalf("usage sequence\n got %v\nwant %v", r.tokens, want)
	}
	pre := r.usageAtCompaction[0]
	if pre == nil || pre.Tokens != 209950 || pre.Window != 258400 {
		t.Fatalf("usage before compaction = %+v", pre)
	}
	if math.Abs(pre.Fraction-209950.0/258400) > 1e-12 {
		t.Errorf("fraction = %v", pre.Fraction)
	}
	s := r.state
	if s.SessionID != "019c8a59-e9dd-71f0-9ae3-4079fe9726a9" || s.Cwd != "/redacted/path/59b923df4d" {
		t.Errorf("identity = %q %q", s.SessionID, s.Cwd)
	}
	if s.Compactions != 1 || s.Usage == nil || s.Usage.Tokens != 162073 {
		t.Errorf("state = %+v", s)
	}
}

func TestCodexTokenCount125(t *testing.T) {
	r := feedFile(t, Codex, codex125)
	if len(r.compactions) != 0 {
		t.Errorf("compactions = %+v, want none", r.compactions)
	}
	s := r.state
	if s.Usage == nil || *s.Usage != NewUsage(131573, 258400) {
		t.Fatalf("last usage = %+v, want 131573 of 258400", s.Usage)
	}
	if math.Abs(s.Usage.Fraction-0.509183) > 1e-6 {
		t.Errorf("fraction = %v", s.Usage.Fraction)
	}
	if s.SessionID != "019e1625-789d-76c0-80ab-3724b5ddb799" ||
		s.Cwd != "/Users/Sample_User/repos/codemie-ai/codemie-code" {
		t.Errorf("identity = %q %q", s.SessionID, s.Cwd)
	}
	// All 66 token_count events of this rollout carry a new reading.
	if len(r.usages) != 66 {
		t.Errorf("usage updates = %d, want 66", len(r.usages))
	}
	for i := 1; i < len(r.usages); i++ {
		if r.usages[i] == r.usages[i-1] {
			t.Errorf("update %d repeats the previous usage %+v", i, r.usages[i])
		}
	}
}

// The 0.146 drift catalog is consumed without an error; its six
// "compacted" lines count once each, its context_compacted events not at
// all, and its later session_meta copies do not rename the session.
func TestCodexSchemaCatalog(t *testing.T) {
	r := feedFile(t, Codex, codexCat)
	if len(r.compactions) != 6 {
		t.Errorf("compactions = %d, want the 6 compacted lines", len(r.compactions))
	}
	s := r.state
	if s.SessionID != "019fc8be-3658-7ca3-9e29-000000000000" || s.Cwd != "/tmp/repo" {
		t.Errorf("identity = %q %q", s.SessionID, s.Cwd)
	}
	if s.Malformed != 0 {
		t.Errorf("malformed = %d", s.Malformed)
	}
	if !equalInts(r.tokens[:1], []int64{16341}) {
		t.Errorf("usage sequence = %v", r.tokens)
	}
}

func TestCodexWindow(t *testing.T) {
	tc := func(in, window string) []byte {
		info := `{"last_token_usage":{"input_tokens":` + in + `,"cached_input_tokens":100}` + window + `}`
		return []byte(`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":` + info + `,"rate_limits":null}}`)
	}
	tr := NewTracker(Codex)
	// No window anywhere yet: unknown.
	u, _ := tr.Line(tc("1000", ""))
	if u.Usage == nil || *u.Usage != (Usage{Tokens: 1000}) {
		t.Errorf("no window: %+v", u.Usage)
	}
	// task_started supplies it.
	tr.Line([]byte(`{"type":"event_msg","payload":{"type":"task_started","model_context_window":4000}}`))
	u, _ = tr.Line(tc("1000", ""))
	if u.Usage == nil || *u.Usage != NewUsage(1000, 4000) {
		t.Errorf("task_started window: %+v", u.Usage)
	}
	// The event's own window wins; cached input is not added.
	u, _ = tr.Line(tc("1000", `,"model_context_window":2000`))
	if u.Usage == nil || *u.Usage != NewUsage(1000, 2000) {
		t.Errorf("event window: %+v", u.Usage)
	}
	// Repeats, info:null and all-zero events change nothing.
	for _, l := range [][]byte{
		tc("1000", `,"model_context_window":2000`),
		[]byte(`{"type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":5}}}}`),
		tc("0", `,"model_context_window":2000`),
		tc(`"12"`, `,"model_context_window":2000`),
		[]byte(`{"type":"event_msg","payload":{"type":"context_compacted"}}`),
		[]byte(`{"type":"world_state","payload":{"anything":[1,2,3]}}`),
	} {
		if u, err := tr.Line(l); err != nil || u != (Update{}) {
			t.Errorf("%s: %+v %v", l, u, err)
		}
	}
	// Clamped when the reading exceeds the window.
	u, _ = tr.Line(tc("5000", `,"model_context_window":2000`))
	if u.Usage == nil || u.Usage.Fraction != 1 {
		t.Errorf("clamp: %+v", u.Usage)
	}
	// A compaction's PreTokens is the last reading; a second compaction
	// with no reading between has none.
	u, _ = tr.Line([]byte(`{"type":"compacted","payload":{"message":"","replacement_history":[]}}`))
	if u.Compaction == nil || u.Compaction.PreTokens != 5000 {
		t.Errorf("compaction: %+v", u.Compaction)
	}
	u, _ = tr.Line([]byte(`{"type":"compacted","payload":{"message":""}}`))
	if u.Compaction == nil || u.Compaction.PreTokens != 0 {
		t.Errorf("second compaction: %+v", u.Compaction)
	}
	if n := tr.State().Compactions; n != 2 {
		t.Errorf("compactions = %d", n)
	}
}

func TestCodexSessionMetaFirstWins(t *testing.T) {
	tr := NewTracker(Codex)
	lines := []string{
		`{"type":"session_meta","payload":{"id":"[trimmed for fixture]","cwd":"/a"}}`,
		`{"type":"session_meta","payload":{"id":"019e-1","cwd":"/repo"}}`,
		`{"type":"session_meta","payload":{"id":"019e-2","cwd":"/other"}}`,
	}
	var got []Update
	for _, l := range lines {
		u, err := tr.Line([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, u)
	}
	if got[0] != (Update{}) || got[1] != (Update{SessionID: "019e-1", Cwd: "/repo"}) || got[2] != (Update{}) {
		t.Errorf("updates = %+v", got)
	}
}
