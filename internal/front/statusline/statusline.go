// Package statusline reads the JSON object Claude Code writes to a
// statusline command's stdin on every render, and keeps the session's
// identity and how full its context window is.
//
// The payload grew in stages (SOURCES.md §5.3): no context data (2025-08),
// context_window totals (2025-12), then used_percentage,
// remaining_percentage and current_usage (2026-01). Any field may be
// absent or null, and hook_event_name is not sent by current versions, so
// nothing but a JSON object is required.
package statusline

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// Payload is what the daemon keeps of one statusline payload.
type Payload struct {
	SessionID      string
	TranscriptPath string
	// Cwd is the session's current directory: cwd, else
	// workspace.current_dir.
	Cwd string
	// ProjectDir is workspace.project_dir, the directory Claude Code was
	// started in, which names the transcript folder.
	ProjectDir string
	// Model is model.id, e.g. "claude-opus-4-6[1m]".
	Model   string
	Version string
	// WindowSize is context_window.context_window_size; 0 when absent. It
	// is what a transcript.Tracker cannot learn from the transcript
	// (transcript.Options.WindowFor).
	WindowSize int64
	// Exceeds200K is exceeds_200k_tokens.
	Exceeds200K bool
	// Usage is how full the context is, nil when the payload does not say
	// (see Parse for which fields count). Its Fraction comes from the
	// payload's own used_percentage when present, so it can be set while
	// Window is 0.
	Usage *capsule.ContextUsage
	// UsageFrom names the field Usage came from: SourceUsedPercentage,
	// SourceCurrentUsage, or "" when Usage is nil.
	UsageFrom string
}

// The fields a Payload.Usage can come from.
const (
	SourceUsedPercentage = "used_percentage"
	SourceCurrentUsage   = "current_usage"
)

// Parse reads a statusline payload. It fails only on malformed JSON or a
// value that is not an object; a field of an unexpected shape is treated as
// absent, and a string field that is not printable UTF-8 (or is longer than
// 4096 bytes) is dropped.
//
// The context usage is taken, in this order of preference, from:
//
//  1. context_window.used_percentage, when it is a number: Claude Code's
//     own figure, computed on input tokens only. Fraction is it / 100,
//     clamped to [0, 1]; Tokens is the current_usage sum when present,
//     else the percentage of the window.
//  2. context_window.current_usage, when it is an object:
//     input_tokens + cache_creation_input_tokens + cache_read_input_tokens
//     (output excluded, as for used_percentage) over context_window_size;
//     Window and Fraction are 0 when the size is unknown.
//  3. Nothing: Usage is nil.
//
// total_input_tokens is never used. It meant the cumulative session total
// until the 2026-08 docs redefined it as the tokens now in context, and a
// payload does not say which meaning it follows. Besides, every payload
// that carries used_percentage also carries current_usage, so the only
// payloads it could serve are those where both are null: before the first
// API response, when total_input_tokens is 0, and right after /compact,
// when the context_window figures are reported stale (anthropics/claude-code
// #15008, #29651). Unknown is the honest answer there.
func Parse(b []byte) (*Payload, error) {
	top, err := object(b)
	if err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errNotObject
	}
	p := &Payload{
		SessionID:      text(top["session_id"]),
		TranscriptPath: text(top["transcript_path"]),
		Cwd:            text(top["cwd"]),
		Version:        text(top["version"]),
		Exceeds200K:    string(top["exceeds_200k_tokens"]) == "true",
	}
	if m, _ := object(top["model"]); m != nil {
		p.Model = text(m["id"])
	}
	if ws, _ := object(top["workspace"]); ws != nil {
		if p.Cwd == "" {
			p.Cwd = text(ws["current_dir"])
		}
		p.ProjectDir = text(ws["project_dir"])
	}
	cw, _ := object(top["context_window"])
	if cw == nil {
		return p, nil
	}
	if size, ok := count(cw["context_window_size"]); ok {
		p.WindowSize = size
	}
	var (
		tokens int64
		hasSum bool
	)
	if cu, _ := object(cw["current_usage"]); cu != nil {
		tokens, hasSum = usageSum(cu)
	}
	if pct, ok := number(cw["used_percentage"]); ok && pct >= 0 {
		frac := min(pct/100, 1)
		if !hasSum {
			tokens = int64(math.Round(frac * float64(p.WindowSize)))
		}
		p.Usage = &capsule.ContextUsage{Tokens: tokens, Window: p.WindowSize, Fraction: frac}
		p.UsageFrom = SourceUsedPercentage
		return p, nil
	}
	if hasSum {
		u := capsule.NewContextUsage(tokens, p.WindowSize)
		p.Usage = &u
		p.UsageFrom = SourceCurrentUsage
	}
	return p, nil
}

// usageSum adds the input-side counts of current_usage. A count of the
// wrong shape makes the whole sum unknown, and so does a zero sum: a real
// API response always has input.
func usageSum(cu map[string]json.RawMessage) (int64, bool) {
	var sum int64
	for _, k := range []string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} {
		raw, present := cu[k]
		if !present || string(raw) == "null" {
			continue
		}
		n, ok := count(raw)
		if !ok {
			return 0, false
		}
		sum += n
	}
	return sum, sum > 0
}

var errNotObject = errors.New("statusline: payload is not a JSON object")

// object decodes raw as a JSON object. A null, absent or non-object value
// gives a nil map and no error; malformed JSON is an error.
func object(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, nil
		}
		return nil, err
	}
	return m, nil
}

// maxCount bounds a token count, as in package transcript.
const maxCount = 1 << 40

// number reads a finite JSON number.
func number(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// count reads a non-negative integral number no larger than maxCount.
func count(raw json.RawMessage) (int64, bool) {
	f, ok := number(raw)
	if !ok || f < 0 || f > maxCount || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// maxText bounds a kept string (a path, an id, a version).
const maxText = 4096

// text reads a JSON string that is printable UTF-8 of at most maxText
// bytes; anything else gives "".
func text(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || len(s) > maxText || !utf8.ValidString(s) {
		return ""
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ""
		}
	}
	return s
}
