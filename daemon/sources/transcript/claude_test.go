package transcript

import (
	"errors"
	"math"
	"testing"
)

const (
	spotter   = "transcript-autocompact-opus46-v2.1.39.jsonl"
	fasthooks = "transcript-manual-compact-v2.0.76-fasthooks.jsonl"
	shepherd  = "transcript-manual-compact-excerpt-v2.1.270-shepherd.jsonl"
	short     = "transcript-short-session-v2.1.38.jsonl"
	claudeCat = "transcript-schema-catalog-v2.1.x-agent-sessions.jsonl"
	acompact  = "transcript-subagent-acompact-v2.1.39.jsonl"
	sidechain = "transcript-subagent-sidechain-v2.0.76-fasthooks.jsonl"
)

func TestClaudeAutocompactSpotter(t *testing.T) {
	r := feedFile(t, ClaudeCode, spotter)
	// Main-chain context per distinct message.id, in file order (the
	// fixture's repeated content-block lines report once); -1 is the
	// compact_boundary.
	want := []int64{
		25882, 31180, 51800, 57822, 62943, 73603, 99438, 111391, 117391,
		121482, 127640, 131730, 142392, 146929, 151778, 161193, 165255,
		165404, 165509, 165654, 165804, 166759,
		-1,
		33960, 37900, 38625, 38769, 40308, 48224, 53884, 58466, 63024,
		69451, 74368, 77004, 77273, 77334,
	}
	if !equalInts(r.tokens, want) {
		t.Fatalf("usage sequence\n got %v\nwant %v", r.tokens, want)
	}
	if len(r.compactions) != 1 {
		t.Fatalf("compactions = %d, want 1", len(r.compactions))
	}
	if c := r.compactions[0]; c != (Compaction{Trigger: "auto", PreTokens: 167094}) {
		t.Errorf("compaction = %+v", c)
	}
	pre := r.usageAtCompaction[0]
	if pre == nil || pre.Tokens != 166759 || pre.Window != 200000 {
		t.Fatalf("usage before the boundary = %+v, want 166759 of 200000", pre)
	}
	if math.Abs(pre.Fraction-0.833795) > 1e-6 {
		t.Errorf("fraction before the boundary = %v", pre.Fraction)
	}
	s := r.state
	if s.SessionID != "258c7280-ae70-4798-800f-63464d01a85d" {
		t.Errorf("session = %q", s.SessionID)
	}
	if s.Cwd != "/home/USER/projects/spotter-worktrees/spotter-gqc" {
		t.Errorf("cwd = %q", s.Cwd)
	}
	if s.Compactions != 1 || s.LastCompaction == nil || s.LastCompaction.Trigger != "auto" {
		t.Errorf("state compactions = %d, last %+v", s.Compactions, s.LastCompaction)
	}
	if s.Usage == nil || s.Usage.Tokens != 77334 {
		t.Errorf("final usage = %+v", s.Usage)
	}
	if s.Lines != 122 || s.Malformed != 0 {
		t.Errorf("lines = %d, malformed = %d", s.Lines, s.Malformed)
	}
}

func TestClaudeManualCompactFasthooks(t *testing.T) {
	r := feedFile(t, ClaudeCode, fasthooks)
	if len(r.compactions) != 1 || r.compactions[0] != (Compaction{Trigger: "manual", PreTokens: 21558}) {
		t.Fatalf("compactions = %+v, want one manual with preTokens 21558", r.compactions)
	}
	if pre := r.usageAtCompaction[0]; pre == nil || pre.Tokens != 21331 {
		t.Errorf("usage before the boundary = %+v, want 21331", pre)
	}
	s := r.state
	if s.Usage != nil {
		t.Errorf("no response after the compaction, yet usage = %+v", s.Usage)
	}
	if s.SessionID != "c45af7b1-cb7c-4e51-93db-8cbb250a877a" || s.Cwd != "/workspace" {
		t.Errorf("identity = %q %q", s.SessionID, s.Cwd)
	}
	// 12 distinct responses: 2 to 4 lines each in the file.
	if len(r.usages) != 12 {
		t.Errorf("usage updates = %d, want 12: %v", len(r.usages), r.tokens)
	}
}

func TestClaudeManualCompactShepherd(t *testing.T) {
	r := feedFile(t, ClaudeCode, shepherd)
	want := Compaction{Trigger: "manual", PreTokens: 23010, PostTokens: 1873}
	if len(r.compactions) != 1 || r.compactions[0] != want {
		t.Fatalf("compactions = %+v, want [%+v]", r.compactions, want)
	}
	if !equalInts(r.tokens, []int64{22977, -1}) {
		t.Errorf("usage sequence = %v", r.tokens)
	}
	if r.state.SessionID != "0141fab3-8bf8-4b69-be1f-89552ccfce5d" {
		t.Errorf("session = %q", r.state.SessionID)
	}
}

func TestClaudeShortSession(t *testing.T) {
	r := feedFile(t, ClaudeCode, short)
	if len(r.compactions) != 0 {
		t.Errorf("compactions = %+v", r.compactions)
	}
	// Five lines, one response.
	if !equalInts(r.tokens, []int64{25353}) {
		t.Errorf("usage sequence = %v", r.tokens)
	}
}

// The drift catalog is consumed line by line without an error; its
// summary line is a title and its two compact_boundary entries count once
// each (the second's trigger is a redaction marker and is dropped).
func TestClaudeSchemaCatalog(t *testing.T) {
	lines := fixtureLines(t, claudeCat)
	tr := NewTracker(ClaudeCode)
	var compactions []Compaction
	var tokens []int64
	for i, l := range lines {
		u, err := tr.Line(l)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if u.Compaction != nil {
			compactions = append(compactions, *u.Compaction)
		}
		if u.Usage != nil {
			tokens = append(tokens, u.Usage.Tokens)
		}
		if i+1 == 6 && u != (Update{}) {
			t.Errorf("summary line 6 produced %+v", u)
		}
	}
	want := []Compaction{{Trigger: "auto", PreTokens: 120000}, {}}
	if len(compactions) != len(want) || compactions[0] != want[0] || compactions[1] != want[1] {
		t.Errorf("compactions = %+v, want %+v", compactions, want)
	}
	s := tr.State()
	if s.Malformed != 0 || s.Lines != int64(len(lines)) {
		t.Errorf("lines = %d, malformed = %d", s.Lines, s.Malformed)
	}
	// Every other response is a side chain, has no usage or is a
	// zero-usage placeholder, so the only reading is the hand-built line 29
	// (10 tokens), and it is unknown again after the last boundary.
	if !equalInts(tokens, []int64{10}) {
		t.Errorf("usage sequence = %v, want [10]", tokens)
	}
	if s.Usage != nil {
		t.Errorf("usage = %+v, want unknown after the last boundary", s.Usage)
	}
}

func TestClaudeSummaryIsNotCompaction(t *testing.T) {
	tr := NewTracker(ClaudeCode)
	for _, l := range []string{
		`{"type":"summary","summary":"Conversation compacted","leafUuid":"x"}`,
		`{"type":"summary","summary":"Claude Code: Context usage summary","leafUuid":"leaf"}`,
		`{"type":"user","isCompactSummary":true,"isVisibleInTranscriptOnly":true,"message":{"role":"user","content":"This session is being continued"}}`,
	} {
		u, err := tr.Line([]byte(l))
		if err != nil || u.Compaction != nil {
			t.Errorf("%s: %+v %v", l, u, err)
		}
	}
	if n := tr.State().Compactions; n != 0 {
		t.Errorf("compactions = %d", n)
	}
}

// Side-chain transcripts (a subagent's, the compaction summarizer's)
// contribute no main-chain usage, alone or interleaved with the main chain.
func TestClaudeSidechainsContributeNothing(t *testing.T) {
	for _, name := range []string{acompact, sidechain} {
		r := feedFile(t, ClaudeCode, name)
		if r.state.Usage != nil || len(r.usages) != 0 || r.state.Compactions != 0 {
			t.Errorf("%s: usage %+v, updates %v, compactions %d", name, r.state.Usage, r.tokens, r.state.Compactions)
		}
		if r.state.Cwd != "" {
			t.Errorf("%s: cwd %q taken from a side chain", name, r.state.Cwd)
		}
	}

	main := fixtureLines(t, spotter)
	side := fixtureLines(t, acompact)
	// Insert the summarizer's lines (its usage: 169,248) right before the
	// boundary, where Claude Code wrote them in time.
	const boundary = 63 - 1
	var mixed [][]byte
	mixed = append(mixed, main[:boundary]...)
	mixed = append(mixed, side...)
	mixed = append(mixed, main[boundary:]...)
	got := feed(t, ClaudeCode, Options{}, mixed)
	want := feed(t, ClaudeCode, Options{}, main)
	if !equalInts(got.tokens, want.tokens) {
		t.Errorf("interleaved side chain changed the usage:\n got %v\nwant %v", got.tokens, want.tokens)
	}
}

func TestClaudeWindow(t *testing.T) {
	line := `{"type":"assistant","sessionId":"s","message":{"id":"m1","model":"%s","usage":{"input_tokens":10,"cache_creation_input_tokens":40000,"cache_read_input_tokens":10000}}}`
	cases := []struct {
		model string
		o     Options
		want  int64
	}{
		{"claude-opus-4-6", Options{}, 200000},
		{"claude-opus-4-6[1m]", Options{}, 1000000},
		{"claude-sonnet-4-5[1M]", Options{}, 1000000},
		{"claude-opus-4-6", Options{WindowFor: func(string) int64 { return 1000000 }}, 1000000},
		{"claude-opus-4-6", Options{WindowFor: func(string) int64 { return 0 }}, 0},
		{"claude-opus-4-6", Options{WindowFor: func(string) int64 { return -5 }}, 0},
	}
	for _, c := range cases {
		tr := NewTrackerWith(ClaudeCode, c.o)
		u, err := tr.Line([]byte(sprintf(line, c.model)))
		if err != nil || u.Usage == nil {
			t.Fatalf("%s: %+v %v", c.model, u, err)
		}
		got := *u.Usage
		wantFrac := 0.0
		if c.want > 0 {
			wantFrac = 50010 / float64(c.want)
		}
		if got.Tokens != 50010 || got.Window != c.want || got.Fraction != wantFrac {
			t.Errorf("%s: %+v, want window %d", c.model, got, c.want)
		}
	}
}

func TestNewUsageClamps(t *testing.T) {
	for _, c := range []struct {
		tokens, window int64
		want           Usage
	}{
		{250000, 200000, Usage{Tokens: 250000, Window: 200000, Fraction: 1}},
		{100, 0, Usage{Tokens: 100, Window: 0, Fraction: 0}},
		{-1, 100, Usage{Tokens: 0, Window: 100, Fraction: 0}},
		{50, -1, Usage{Tokens: 50, Window: 0, Fraction: 0}},
		{50, 100, Usage{Tokens: 50, Window: 100, Fraction: 0.5}},
	} {
		if got := NewUsage(c.tokens, c.window); got != c.want {
			t.Errorf("NewUsage(%d, %d) = %+v, want %+v", c.tokens, c.window, got, c.want)
		}
	}
}

// Odd shapes in well-formed lines are ignored, never guessed at.
func TestClaudeOddShapes(t *testing.T) {
	for _, l := range []string{
		`{"type":"assistant","message":"text"}`,
		`{"type":"assistant","message":{"id":"a","usage":"many"}}`,
		`{"type":"assistant","message":{"id":"b","usage":{"input_tokens":"5","cache_read_input_tokens":100}}}`,
		`{"type":"assistant","message":{"id":"c","usage":{"input_tokens":5.5,"cache_read_input_tokens":100}}}`,
		`{"type":"assistant","message":{"id":"d","usage":{"input_tokens":-5,"cache_read_input_tokens":100}}}`,
		`{"type":"assistant","message":{"id":"e","usage":{"input_tokens":1e300}}}`,
		`{"type":"assistant","isSidechain":"yes","message":{"id":"f","usage":{"input_tokens":5}}}`,
		`{"type":"assistant","isApiErrorMessage":true,"message":{"id":"g","usage":{"input_tokens":5}}}`,
		`{"type":"assistant","message":{"id":"h","model":"<synthetic>","usage":{"input_tokens":5}}}`,
		`{"type":"assistant","message":{"id":"i","usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}`,
		`{"type":"system","subtype":"compact_boundary","isSidechain":true,"compactMetadata":{"trigger":"auto","preTokens":1}}`,
		`{"type":["assistant"],"message":{"id":"j","usage":{"input_tokens":5}}}`,
		`{"type":"assistant","sessionId":"[trimmed for fixture]","cwd":"relative/dir"}`,
		`{"type":"assistant","sessionId":"a b","cwd":"/tmp/x\u0007"}`,
	} {
		tr := NewTracker(ClaudeCode)
		u, err := tr.Line([]byte(l))
		if err != nil {
			t.Errorf("%s: error %v", l, err)
		}
		if u != (Update{}) {
			t.Errorf("%s: update %+v", l, u)
		}
	}
	// A float that is an integer is still a count.
	tr := NewTracker(ClaudeCode)
	u, _ := tr.Line([]byte(`{"type":"assistant","message":{"id":"k","usage":{"input_tokens":1e3,"cache_read_input_tokens":100.0}}}`))
	if u.Usage == nil || u.Usage.Tokens != 1100 {
		t.Errorf("integral floats: %+v", u.Usage)
	}
	// An unknown trigger is a marker we do not know: dropped.
	u, _ = tr.Line([]byte(`{"type":"system","subtype":"compact_boundary","compactMetadata":{"trigger":"because I said so","preTokens":7}}`))
	if u.Compaction == nil || *u.Compaction != (Compaction{PreTokens: 7}) {
		t.Errorf("unknown trigger: %+v", u.Compaction)
	}
}

func TestClaudeCountsOnce(t *testing.T) {
	tr := NewTracker(ClaudeCode)
	resp := `{"type":"assistant","message":{"id":"msg_1","usage":{"input_tokens":3,"cache_read_input_tokens":1000}}}`
	boundary := `{"type":"system","subtype":"compact_boundary","uuid":"b1","compactMetadata":{"trigger":"manual","preTokens":1003}}`
	tool := `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"ok"}]}}`
	var updates, compactions int
	for _, l := range []string{resp, tool, resp, resp, boundary, boundary, resp} {
		u, err := tr.Line([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if u.Usage != nil {
			updates++
		}
		if u.Compaction != nil {
			compactions++
		}
	}
	// The response after the boundary repeats a message.id already counted:
	// it is the same pre-compaction response, not a new reading.
	if updates != 1 || compactions != 1 {
		t.Errorf("updates = %d, compactions = %d; want 1 and 1", updates, compactions)
	}
	if tr.State().Usage != nil {
		t.Errorf("usage after the boundary = %+v", tr.State().Usage)
	}
}

func TestMalformedLinesLeaveStateAlone(t *testing.T) {
	for _, f := range []Format{ClaudeCode, Codex} {
		tr := NewTracker(f)
		good := `{"type":"assistant","sessionId":"s1","message":{"id":"m","usage":{"input_tokens":100}}}`
		if f == Codex {
			good = `{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":100},"model_context_window":1000}}}`
		}
		if _, err := tr.Line([]byte(good)); err != nil {
			t.Fatal(err)
		}
		before := tr.State()
		bad := []string{
			`{`, `not json`, `[1,2]`, `"str"`, `42`, `null`,
			`{"type":"assistant","message":{"id":"x","usage":{"input_tokens":999}}`,
			`{"type":"compacted","payload":{}}}`,
			"{\"type\":\"compacted\",\"payload\":\xff}",
		}
		for _, l := range bad {
			u, err := tr.Line([]byte(l))
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%v %q: err = %v", f, l, err)
			}
			if u != (Update{}) {
				t.Errorf("%v %q: update %+v", f, l, u)
			}
		}
		after := tr.State()
		if after.Malformed != int64(len(bad)) || after.Lines != before.Lines+int64(len(bad)) {
			t.Errorf("%v: counters %d/%d", f, after.Malformed, after.Lines)
		}
		after.Lines, after.Malformed = before.Lines, before.Malformed
		if after.SessionID != before.SessionID || after.Compactions != before.Compactions ||
			*after.Usage != *before.Usage {
			t.Errorf("%v: state changed: %+v -> %+v", f, before, after)
		}
		// Blank lines are neither errors nor updates.
		if u, err := tr.Line([]byte("  \r\n")); err != nil || u != (Update{}) {
			t.Errorf("%v: blank line: %+v %v", f, u, err)
		}
	}
}

func TestUnknownFormat(t *testing.T) {
	var tr Tracker
	if _, err := tr.Line([]byte(`{}`)); err == nil {
		t.Error("zero Tracker accepted a line")
	}
}
