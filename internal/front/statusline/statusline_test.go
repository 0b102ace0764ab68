package statusline

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func usage(tokens, window int64, frac float64) *capsule.ContextUsage {
	return &capsule.ContextUsage{Tokens: tokens, Window: window, Fraction: frac}
}

// Every statusline fixture parses, with the expected identity and usage.
func TestParseFixtures(t *testing.T) {
	const placeholder = "abc123..."
	cases := []struct {
		file string
		want Payload
	}{
		{"statusline-captured-first-render-v2.1.226-windows.json", Payload{
			SessionID:      "d3ebc580-85b8-4b62-8633-40991363c8ce",
			TranscriptPath: `C:\Users\Techn\.claude\projects\C--Users-Techn-AppData-Local-Temp-w50d-probe\d3ebc580-85b8-4b62-8633-40991363c8ce.jsonl`,
			Cwd:            `C:\Users\Techn\AppData\Local\Temp\w50d-probe`,
			ProjectDir:     `C:\Users\Techn\AppData\Local\Temp\w50d-probe`,
			Model:          "claude-haiku-4-5-20251001",
			Version:        "2.1.226",
			WindowSize:     200000,
			// current_usage and used_percentage are null: unknown, not 0.
		}},
		{"statusline-captured-later-render-v2.1.226-windows.json", Payload{
			SessionID:      "d3ebc580-85b8-4b62-8633-40991363c8ce",
			TranscriptPath: `C:\Users\Techn\.claude\projects\C--Users-Techn-AppData-Local-Temp-w50d-probe\d3ebc580-85b8-4b62-8633-40991363c8ce.jsonl`,
			Cwd:            `C:\Users\Techn\AppData\Local\Temp\w50d-probe`,
			ProjectDir:     `C:\Users\Techn\AppData\Local\Temp\w50d-probe`,
			Model:          "claude-haiku-4-5-20251001",
			Version:        "2.1.226",
			WindowSize:     200000,
			Usage:          usage(44295, 200000, 0.22),
			UsageFrom:      SourceUsedPercentage,
		}},
		{"statusline-captured-v1.0.88-ccusage.json", Payload{
			SessionID:      "73cc9f9a-2775-4418-beec-bc36b62a1c6f",
			TranscriptPath: "/Users/ryoppippi/.config/claude/projects/-Users-ryoppippi-ghq-github-com-ryoppippi-ccusage/73cc9f9a-2775-4418-beec-bc36b62a1c6f.jsonl",
			Cwd:            "/Users/ryoppippi/ghq/github.com/ryoppippi/ccusage",
			ProjectDir:     "/Users/ryoppippi/ghq/github.com/ryoppippi/ccusage",
			Model:          "claude-sonnet-4-20250514",
			Version:        "1.0.88",
		}},
		{"statusline-ccstatusline-example-session-start-v2.1.19.json", Payload{
			SessionID:      placeholder,
			TranscriptPath: "/path/to/transcript.jsonl",
			Cwd:            "/current/working/directory",
			ProjectDir:     "/current/working/directory",
			Model:          "claude-opus-4-5-20251101",
			Version:        "2.1.19",
			WindowSize:     200000,
		}},
		{"statusline-ccstatusline-example-v2.1.80.json", Payload{
			SessionID:      placeholder,
			TranscriptPath: "/path/to/transcript.json",
			Cwd:            "/current/working/directory",
			ProjectDir:     "/home/user/projects/my-project",
			Model:          "claude-opus-4-6[1m]",
			Version:        "2.1.80",
			WindowSize:     1000000,
			// used_percentage 8 wins over this placeholder's inconsistent
			// current_usage (15,500 of 1M would be 1.55%).
			Usage:     usage(15500, 1000000, 0.08),
			UsageFrom: SourceUsedPercentage,
		}},
		{"statusline-docs-2025-08-no-context-window.json", Payload{
			SessionID:      placeholder,
			TranscriptPath: "/path/to/transcript.json",
			Cwd:            "/current/working/directory",
			ProjectDir:     "/original/project/directory",
			Model:          "claude-opus-4-1",
		}},
		{"statusline-docs-2025-12-context-window-totals-only.json", Payload{
			SessionID:      placeholder,
			TranscriptPath: "/path/to/transcript.json",
			Cwd:            "/current/working/directory",
			ProjectDir:     "/original/project/directory",
			Model:          "claude-opus-4-1",
			Version:        "1.0.80",
			WindowSize:     200000,
			// total_input_tokens (15234) is not a context reading.
		}},
		{"statusline-docs-2026-01-used-percentage.json", Payload{
			SessionID:      placeholder,
			TranscriptPath: "/path/to/transcript.json",
			Cwd:            "/current/working/directory",
			ProjectDir:     "/original/project/directory",
			Model:          "claude-opus-4-1",
			Version:        "1.0.80",
			WindowSize:     200000,
			Usage:          usage(15500, 200000, 0.425),
			UsageFrom:      SourceUsedPercentage,
		}},
		{"statusline-docs-2026-08-full-schema.json", Payload{
			SessionID:      placeholder,
			TranscriptPath: "/path/to/transcript.jsonl",
			Cwd:            "/current/working/directory",
			ProjectDir:     "/original/project/directory",
			Model:          "claude-opus-5",
			Version:        "2.1.90",
			WindowSize:     200000,
			Usage:          usage(15500, 200000, 0.08),
			UsageFrom:      SourceUsedPercentage,
		}},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "statusline-*.json"))
	if err != nil || len(files) != len(cases) {
		t.Fatalf("%d fixtures, %d cases (%v)", len(files), len(cases), err)
	}
	for _, c := range cases {
		got, err := Parse(readFixture(t, c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if !samePayload(*got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.file, show(*got), show(c.want))
		}
	}
}

func samePayload(a, b Payload) bool {
	if (a.Usage == nil) != (b.Usage == nil) || a.Usage != nil && *a.Usage != *b.Usage {
		return false
	}
	a.Usage, b.Usage = nil, nil
	return a == b
}

func show(p Payload) string {
	u := "nil"
	if p.Usage != nil {
		u = fmt.Sprintf("%+v", *p.Usage)
	}
	p.Usage = nil
	return fmt.Sprintf("%+v usage=%s", p, u)
}

func TestParseUsagePreference(t *testing.T) {
	const cu = `"current_usage":{"input_tokens":8500,"output_tokens":1200,"cache_creation_input_tokens":5000,"cache_read_input_tokens":2000}`
	cases := []struct {
		cw   string
		want *capsule.ContextUsage
		from string
	}{
		{`{"context_window_size":200000,"used_percentage":null,` + cu + `}`, usage(15500, 200000, 0.0775), SourceCurrentUsage},
		{`{"context_window_size":200000,` + cu + `}`, usage(15500, 200000, 0.0775), SourceCurrentUsage},
		{`{` + cu + `}`, usage(15500, 0, 0), SourceCurrentUsage},
		{`{"context_window_size":200000,"used_percentage":50}`, usage(100000, 200000, 0.5), SourceUsedPercentage},
		{`{"used_percentage":12.5}`, usage(0, 0, 0.125), SourceUsedPercentage},
		{`{"context_window_size":200000,"used_percentage":150,` + cu + `}`, usage(15500, 200000, 1), SourceUsedPercentage},
		{`{"context_window_size":200000,"used_percentage":-3,` + cu + `}`, usage(15500, 200000, 0.0775), SourceCurrentUsage},
		{`{"context_window_size":200000,"used_percentage":"22",` + cu + `}`, usage(15500, 200000, 0.0775), SourceCurrentUsage},
		{`{"context_window_size":200000,"current_usage":{"input_tokens":0,"cache_read_input_tokens":0}}`, nil, ""},
		{`{"context_window_size":200000,"current_usage":{"input_tokens":"8","cache_read_input_tokens":10}}`, nil, ""},
		{`{"context_window_size":200000,"current_usage":{"input_tokens":8,"cache_read_input_tokens":null}}`, usage(8, 200000, 8.0/200000), SourceCurrentUsage},
		{`{"context_window_size":200000,"current_usage":null,"used_percentage":null,"total_input_tokens":44295}`, nil, ""},
		{`{"context_window_size":"200000",` + cu + `}`, usage(15500, 0, 0), SourceCurrentUsage},
		{`"not an object"`, nil, ""},
		{`null`, nil, ""},
	}
	for _, c := range cases {
		p, err := Parse([]byte(`{"session_id":"s","context_window":` + c.cw + `}`))
		if err != nil {
			t.Fatalf("%s: %v", c.cw, err)
		}
		if (p.Usage == nil) != (c.want == nil) || p.Usage != nil && (p.Usage.Tokens != c.want.Tokens ||
			p.Usage.Window != c.want.Window || math.Abs(p.Usage.Fraction-c.want.Fraction) > 1e-12) || p.UsageFrom != c.from {
			t.Errorf("%s: usage %+v from %q, want %+v from %q", c.cw, p.Usage, p.UsageFrom, c.want, c.from)
		}
	}
}

func TestParseShapes(t *testing.T) {
	for _, bad := range []string{``, `{`, `[]`, `null`, `"x"`, `42`, `{"a":1}x`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	p, err := Parse([]byte(`{}`))
	if err != nil || !samePayload(*p, Payload{}) {
		t.Errorf("{}: %+v %v", p, err)
	}
	// Odd shapes are dropped, not errors.
	p, err = Parse([]byte(`{"session_id":7,"cwd":null,"model":"opus","workspace":{"current_dir":"/w"},
		"version":"2.1\u0000","transcript_path":"/t\nx","exceeds_200k_tokens":"true","context_window":[1]}`))
	if err != nil || !samePayload(*p, Payload{Cwd: "/w"}) {
		t.Errorf("odd shapes: %s %v", show(*p), err)
	}
	p, _ = Parse([]byte(`{"exceeds_200k_tokens":true,"hook_event_name":"Status"}`))
	if !p.Exceeds200K {
		t.Error("exceeds_200k_tokens")
	}
}

// The statusline's used_percentage and the transcript rule agree. No
// transcript fixture shares a session with a statusline fixture (see
// testdata/NOTE.md), so the check feeds the later render's own
// current_usage to a transcript.Tracker as the main-chain assistant entry
// it came from, with the payload's window, and compares the fractions.
func TestUsedPercentageMatchesTranscriptRule(t *testing.T) {
	raw := readFixture(t, "statusline-captured-later-render-v2.1.226-windows.json")
	p, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ContextWindow struct {
			CurrentUsage   json.RawMessage `json:"current_usage"`
			UsedPercentage float64         `json:"used_percentage"`
		} `json:"context_window"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf(`{"type":"assistant","isSidechain":false,"sessionId":%q,"message":{"id":"msg_x","model":%q,"usage":%s}}`,
		p.SessionID, p.Model, doc.ContextWindow.CurrentUsage)
	tr := transcript.NewTrackerWith(transcript.ClaudeCode, transcript.Options{
		WindowFor: func(string) int64 { return p.WindowSize },
	})
	u, err := tr.Line([]byte(line))
	if err != nil || u.Usage == nil {
		t.Fatalf("tracker: %+v %v", u, err)
	}
	if u.Usage.Tokens != 44295 || u.Usage.Window != 200000 {
		t.Fatalf("transcript rule: %+v, want 44295 of 200000", *u.Usage)
	}
	pct := doc.ContextWindow.UsedPercentage
	if got := u.Usage.Fraction * 100; math.Abs(got-pct) > 1 {
		t.Errorf("transcript rule gives %.2f%%, statusline says %v%%", got, pct)
	}
	if p.Usage == nil || math.Abs(p.Usage.Fraction*100-u.Usage.Fraction*100) > 1 {
		t.Errorf("Parse gives %+v", p.Usage)
	}
}
