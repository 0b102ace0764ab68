package guard

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// What comes from another machine (the fleet's state of an agent, the
// writes the fleet replays, its directions) is untrusted input. It passes
// the very decoders and rules a local write passes: each part of a state
// is checked as the checkpoint (or capsule) that would have stored it, and
// a replayed checkpoint is decoded as a body of POST
// /v1/continuity/checkpoint. There is no second set of rules here, only the
// mapping from a state's parts to those inputs.

// MaxRemoteStateBytes bounds a state document read from the fleet. A state
// a daemon wrote is far smaller (its parts are bounded by the limits above
// and the residency's history bounds); a larger one is refused whole.
const MaxRemoteStateBytes = 2 << 20

// maxRemoteName bounds a machine or instance name from the fleet, in
// characters, as shown in resume, status and the log.
const maxRemoteName = 128

// CheckRemoteState checks, part by part, an agent's state document read
// from the fleet, and removes from st every part that fails: the focus,
// the working state, each decision, the public status, each commitment
// (every open one when more are open than MaxOpenCommitments), the stop,
// each receipt, the plan, the context and the capsule. It returns one
// refusal per part removed, naming the part (the Field of each is its path
// in the resume document) and the rule; nothing in them repeats a value.
func (g *Guard) CheckRemoteState(st *capsule.Resume) []*capsule.Error {
	var out []*capsule.Error
	refuse := func(e *capsule.Error) bool {
		if e != nil {
			out = append(out, e)
		}
		return e != nil
	}
	if st.Focus != "" && refuse(g.checkAsCheckpoint(capsule.Checkpoint{Focus: &st.Focus}, "", "")) {
		st.Focus, st.FocusUpdatedAt = "", nil
	}
	if ws := st.WorkingState; ws != nil {
		note := capsule.WorkingState{NextAction: &ws.NextAction, LastResult: &ws.LastResult,
			ResultRef: nullable(ws.ResultRef), WaitingFor: nullable(ws.WaitingFor)}
		e := g.checkAsCheckpoint(capsule.Checkpoint{WorkingState: &note}, "", "")
		if e == nil {
			e = checkOrigin(ws.Origin, "working_state.origin")
		}
		if refuse(e) {
			st.WorkingState = nil
		}
	}
	if ps := st.PublicStatus; ps != nil && refuse(g.checkAsCheckpoint(capsule.Checkpoint{PublicStatus: &ps.PublicStatus}, "", "")) {
		st.PublicStatus = nil
	}
	if sr := st.Stopped; sr != nil && refuse(g.checkAsCheckpoint(capsule.Checkpoint{Stop: &capsule.Stop{Reason: sr.Reason}}, "stop", "stopped")) {
		st.Stopped = nil
	}
	st.Decisions = keepPassing(st.Decisions, func(i int, d capsule.DecisionRecord) bool {
		return !refuse(g.checkAsCheckpoint(capsule.Checkpoint{Decide: &d.Decision}, "decide", indexPath("decisions", i)))
	})
	st.Commitments = g.checkRemoteCommitments(st.Commitments, refuse)
	st.Receipts = keepPassing(st.Receipts, func(i int, r string) bool {
		p := indexPath("receipts", i)
		e := checkText(r, MaxResultRef, capsule.CodeInvalidField, p)
		if e == nil {
			e = g.checkSecret(p, r)
		}
		return !refuse(e)
	})
	if len(st.Plan) > 0 && refuse(g.checkRemotePlan(st.Plan)) {
		st.Plan, st.PlanUpdatedAt = nil, nil
	}
	if refuse(g.checkRemoteContext(st.Context)) {
		st.Context = capsule.ContextState{}
	}
	if c := st.Capsule; c != nil && refuse(refield(g.checkCapsule(&c.Capsule), "", "capsule")) {
		st.Capsule = nil
	}
	return out
}

// CheckRemoteWrite checks a write the fleet replays as the local write it
// claims to be: a checkpoint is decoded strictly as a body of POST
// /v1/continuity/checkpoint (and w.Checkpoint becomes what that decoder
// returns), a capsule passes the capsule guard. The residency's stateful
// rules (the open-commitment limit across the state, unknown ids) apply
// when it is replayed, as they do to a local write.
func (g *Guard) CheckRemoteWrite(w *capsule.Write) *capsule.Error {
	if e := checkOrigin(w.Origin, "origin"); e != nil {
		return e
	}
	switch w.Kind {
	case capsule.WriteCheckpoint:
		if w.Checkpoint == nil {
			return capsule.Refuse(capsule.CodeEmptyCheckpoint, "checkpoint", "a checkpoint write carries no checkpoint")
		}
		body, err := json.Marshal(w.Checkpoint)
		if err != nil {
			return capsule.Refuse(capsule.CodeInvalidJSON, "checkpoint", "does not encode as JSON")
		}
		cp, e := g.decodeCheckpoint(body)
		if e != nil {
			return refield(e, "", "checkpoint")
		}
		w.Checkpoint = cp
	case capsule.WriteCapsule, capsule.WriteSeal:
		if e := g.checkCapsule(w.Capsule); e != nil {
			return refield(e, "", "capsule")
		}
	}
	return nil
}

// CleanRemoteText makes text from another machine that is relayed rather
// than stored (a direction, a machine name) safe to show: invalid UTF-8
// becomes U+FFFD, invisible formatting characters are removed, control
// characters other than tab, newline and carriage return are written out
// visibly (\x1b, \u009b) and credential-shaped spans are redacted, the same
// way as automatic content is.
func CleanRemoteText(s string) string {
	s = stripInvisible(strings.ToValidUTF8(s, string(utf8.RuneError)))
	if firstControl(s) >= 0 {
		var b strings.Builder
		for _, r := range s {
			switch {
			case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r >= 0x80 && r <= 0x9f:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	return RedactCredentialShapes(s, redacted)
}

// CleanRemoteName is CleanRemoteText for a name (a machine, an instance):
// one line, at most maxRemoteName characters.
func CleanRemoteName(s string) string {
	s = CleanRemoteText(strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s))
	if utf8.RuneCountInString(s) > maxRemoteName {
		s = string([]rune(s)[:maxRemoteName-1]) + "…"
	}
	return s
}

// CleanRemoteJSON is CleanRemoteText for every string (keys included) of a
// JSON value; raw comes back as it is when none needs cleaning. A value
// that is not JSON, or nested deeper than MaxJSONDepth, is returned as
// cleaned text in a JSON string.
func CleanRemoteJSON(raw json.RawMessage) json.RawMessage {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers stay as they were written
	if checkJSONDepth(raw) && dec.Decode(&v) == nil && !dec.More() {
		v, changed := cleanJSONValue(v)
		if !changed {
			return raw
		}
		if b, err := json.Marshal(v); err == nil {
			return b
		}
	}
	b, _ := json.Marshal(CleanRemoteText(string(raw)))
	return b
}

// cleanJSONValue cleans every string of v and reports whether any changed.
func cleanJSONValue(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		c := CleanRemoteText(x)
		return c, c != x
	case []any:
		changed := false
		for i := range x {
			var ch bool
			x[i], ch = cleanJSONValue(x[i])
			changed = changed || ch
		}
		return x, changed
	case map[string]any:
		out := make(map[string]any, len(x))
		changed := false
		for k, el := range x {
			ck := CleanRemoteText(k)
			cv, ch := cleanJSONValue(el)
			out[ck] = cv
			changed = changed || ch || ck != k
		}
		return out, changed
	}
	return v, false
}

// checkJSONDepth reports whether raw nests at most MaxJSONDepth levels
// (counting brackets outside strings), so decoding it is cheap.
func checkJSONDepth(raw []byte) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			if depth++; depth > MaxJSONDepth {
				return false
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return true
}

// checkAsCheckpoint runs the checkpoint decoder over cp as a body of POST
// /v1/continuity/checkpoint (bounded by MaxRemoteStateBytes rather than
// MaxBodyBytes) and names a refusal by the state's path: a Field under
// from becomes one under to.
func (g *Guard) checkAsCheckpoint(cp capsule.Checkpoint, from, to string) *capsule.Error {
	body, err := json.Marshal(cp)
	if err != nil {
		return capsule.Refuse(capsule.CodeInvalidJSON, to, "does not encode as JSON")
	}
	_, e := g.decodeCheckpointWithin(body, MaxRemoteStateBytes)
	return refield(e, from, to)
}

// checkRemoteCommitments keeps the commitments that pass: each title as a
// commitment the checkpoint decoder would open, a closed one's evidence
// and a dropped one's reason by their rules, and no more open at once than
// MaxOpenCommitments (else every open one is refused: a state a daemon
// wrote never holds more).
func (g *Guard) checkRemoteCommitments(cs []capsule.Commitment, refuse func(*capsule.Error) bool) []capsule.Commitment {
	var open capsule.CommitmentOps
	for _, c := range cs {
		if c.Status == capsule.CommitmentOpen {
			open.Open = append(open.Open, capsule.OpenCommitment{Title: c.Title})
		}
	}
	tooMany := len(open.Open) > MaxOpenCommitments &&
		refuse(g.checkAsCheckpoint(capsule.Checkpoint{Commitments: &open}, "commitments.open", "commitments"))
	return keepPassing(cs, func(i int, c capsule.Commitment) bool {
		if tooMany && c.Status == capsule.CommitmentOpen {
			return false
		}
		return !refuse(g.checkRemoteCommitment(i, c))
	})
}

func (g *Guard) checkRemoteCommitment(i int, c capsule.Commitment) *capsule.Error {
	const code = capsule.CodeInvalidCommitment
	p := indexPath("commitments", i)
	if e := checkText(c.ID, MaxCommitmentID, code, p+".id"); e != nil || strings.TrimSpace(c.ID) == "" {
		return cmp.Or(e, capsule.Refuse(code, p+".id", "is required"))
	}
	open := capsule.CommitmentOps{Open: []capsule.OpenCommitment{{Title: c.Title}}}
	if e := g.checkAsCheckpoint(capsule.Checkpoint{Commitments: &open}, "commitments.open[0]", p); e != nil {
		return e
	}
	switch c.Status {
	case capsule.CommitmentOpen:
	case capsule.CommitmentClosed:
		if !isEvidence(c.Evidence) {
			return capsule.Refuse(capsule.CodeEvidenceRequired, p+".evidence", "a closed commitment's evidence is post:UUID")
		}
	case capsule.CommitmentDropped:
		drop := capsule.CommitmentOps{Drop: []capsule.DropCommitment{{ID: c.ID, Reason: c.Reason}}}
		if e := g.checkAsCheckpoint(capsule.Checkpoint{Commitments: &drop}, "commitments.drop[0]", p); e != nil {
			return e
		}
	default:
		return capsule.Refuse(code, p+".status", "must be open, closed or dropped")
	}
	for j, h := range c.History {
		hp := indexPath(p+".history", j)
		switch h.Action {
		case "open", "close", "drop":
		default:
			return capsule.Refuse(code, hp+".action", "must be open, close or drop")
		}
		if e := checkText(h.Detail, MaxDropReason, code, hp+".detail"); e != nil {
			return e
		}
		if e := g.checkSecret(hp+".detail", h.Detail); e != nil {
			return e
		}
	}
	return nil
}

// checkRemotePlan applies the plan's bounds (capsule.MaxPlanSteps,
// capsule.MaxPlanStep), its statuses and the text rules to a plan.
func (g *Guard) checkRemotePlan(plan []capsule.PlanStep) *capsule.Error {
	if len(plan) > capsule.MaxPlanSteps {
		return capsule.Refuse(capsule.CodeInvalidField, "plan", "has %d steps; the limit is %d", len(plan), capsule.MaxPlanSteps)
	}
	for i, s := range plan {
		p := indexPath("plan", i)
		if !capsule.ValidPlanStatus(s.Status) {
			return capsule.Refuse(capsule.CodeInvalidField, p+".status", "must be pending, in_progress or completed")
		}
		if e := checkText(s.Step, capsule.MaxPlanStep, capsule.CodeInvalidField, p+".step"); e != nil {
			return e
		}
		if e := g.checkSecret(p+".step", s.Step); e != nil {
			return e
		}
	}
	return nil
}

// checkRemoteContext checks the context window's state as a signal's
// fields are checked: a fraction from 0 to 1, short texts.
func (g *Guard) checkRemoteContext(c capsule.ContextState) *capsule.Error {
	const code = capsule.CodeInvalidField
	if f := c.UsedFraction; f != nil && !(*f >= 0 && *f <= 1) {
		return capsule.Refuse(code, "context.used_fraction", "must be from 0 to 1")
	}
	if c.Compactions < 0 {
		return capsule.Refuse(code, "context.compactions", "must not be negative")
	}
	for _, f := range []struct{ path, v string }{{"context.session_id", c.SessionID}, {"context.session", c.Session}, {"context.via", c.Via}} {
		if e := checkText(f.v, MaxSignalString, code, f.path); e != nil {
			return e
		}
		if e := g.checkSecret(f.path, f.v); e != nil {
			return e
		}
	}
	return nil
}

// checkOrigin refuses an origin that is neither explicit nor automatic.
func checkOrigin(o capsule.Origin, path string) *capsule.Error {
	switch o {
	case capsule.OriginExplicit, capsule.OriginAutomatic, "":
		return nil
	}
	return capsule.Refuse(capsule.CodeInvalidField, path, "must be explicit or automatic")
}

// refield renames a refusal's Field from the path prefix from to to.
func refield(e *capsule.Error, from, to string) *capsule.Error {
	if e == nil || from == to {
		return e
	}
	c := *e
	switch {
	case c.Field == from:
		c.Field = to
	case c.Field == "" || from == "":
		c.Field = strings.TrimSuffix(joinPath(to, c.Field), ".")
	case strings.HasPrefix(c.Field, from+".") || strings.HasPrefix(c.Field, from+"["):
		c.Field = to + strings.TrimPrefix(c.Field, from)
	default:
		c.Field = joinPath(to, c.Field)
	}
	return &c
}

// keepPassing returns the elements of s for which pass is true (a new
// slice; s is left alone).
func keepPassing[T any](s []T, pass func(int, T) bool) []T {
	var out []T
	for i, v := range s {
		if pass(i, v) {
			out = append(out, v)
		}
	}
	return out
}

// nullable is the checkpoint form of a stored optional text.
func nullable(p *string) capsule.NullableString {
	if p == nil {
		return capsule.NullableString{}
	}
	return capsule.NullableString{Set: true, Valid: true, Value: *p}
}
