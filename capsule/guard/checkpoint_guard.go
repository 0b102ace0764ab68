package guard

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/continuityd/continuityd/capsule"
)

// The stateless checkpoint guard. The residency store does the stateful
// checks afterwards (open commitments across stored state, unknown ids,
// RESIDENCY_STOPPED); everything here needs only the body.

// DecodeCheckpoint decodes the body of POST /v1/continuity/checkpoint
// strictly and applies every stateless rule of the Q-Day seed, then the
// secret guard. A refusal is always a *Error; nothing in it repeats a value
// from the body.
//
// A checkpoint that carries stop ignores every other field, as the seed
// says: the result holds only Stop (and ResumeResidency when given). The
// other fields are not validated then, but every string in the body still
// passes the secret guard first, so nothing credential-shaped is stored or
// logged even by accident. Unknown top-level fields are refused either way.
//
// Each section's faults carry that section's code (INVALID_PUBLIC_STATUS,
// INVALID_WORKING_STATE, INVALID_DECISION, INVALID_COMMITMENT,
// INVALID_STOP), a section of the wrong type included; focus and
// resume_residency of the wrong type are INVALID_FIELD, and an unknown
// top-level field is UNKNOWN_FIELD. Field names match exactly (no case
// folding). The first fault in document order is reported.
//
// null is accepted only where the seed gives it a meaning
// (working_state.result_ref and working_state.waiting_for, which it
// clears); elsewhere it is a wrong type. Empty working_state and
// commitments objects carry nothing and are dropped (set to nil).
func (g *Guard) DecodeCheckpoint(body []byte) (*capsule.Checkpoint, error) {
	cp, err := g.decodeCheckpoint(body)
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// checkpointFields are the top-level fields of a checkpoint.
var checkpointFields = map[string]bool{
	"focus": true, "working_state": true, "decide": true, "public_status": true,
	"commitments": true, "stop": true, "resume_residency": true,
}

func (g *Guard) decodeCheckpoint(body []byte) (*capsule.Checkpoint, *capsule.Error) {
	return g.decodeCheckpointWithin(body, MaxBodyBytes)
}

// decodeCheckpointWithin is decodeCheckpoint for a body of at most limit
// bytes. The fleet's state is checked a field at a time as a checkpoint
// (remote.go), under the state's own bound, so that a field over its limit
// is named with its own code rather than as a body too large.
func (g *Guard) decodeCheckpointWithin(body []byte, limit int) (*capsule.Checkpoint, *capsule.Error) {
	if err := checkBody(body, limit); err != nil {
		return nil, err
	}
	ms, _ := readMembers(body) // checkBody proved it is one object
	var stopRaw, resumeRaw json.RawMessage
	for _, m := range ms {
		if !checkpointFields[m.name] {
			return nil, unknownField(capsule.CodeUnknownField, "", m.name)
		}
		switch m.name {
		case "stop":
			stopRaw = m.value
		case "resume_residency":
			resumeRaw = m.value
		}
	}
	if stopRaw != nil {
		return g.decodeStopCheckpoint(body, stopRaw, resumeRaw)
	}

	cp := &capsule.Checkpoint{}
	for _, m := range ms { // document order, so the first fault is reported
		var err *capsule.Error
		switch m.name {
		case "focus":
			cp.Focus, err = decodeFocus(m.value)
		case "working_state":
			cp.WorkingState, err = decodeWorkingState(m.value)
		case "decide":
			cp.Decide, err = decodeDecision(m.value)
		case "public_status":
			cp.PublicStatus, err = g.decodePublicStatus(m.value)
		case "commitments":
			cp.Commitments, err = decodeCommitments(m.value)
		case "resume_residency":
			cp.ResumeResidency, err = decodeBool(m.value, capsule.CodeInvalidField, "resume_residency")
		}
		if err != nil {
			return nil, err
		}
	}
	if cp.IsEmpty() {
		return nil, capsule.Refuse(capsule.CodeEmptyCheckpoint, "",
			"the checkpoint carries nothing to save; send at least one of focus, working_state, decide, public_status, commitments, stop or resume_residency")
	}
	if err := g.checkCheckpointSecrets(cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// decodeStopCheckpoint handles a checkpoint that carries stop.
func (g *Guard) decodeStopCheckpoint(body []byte, stopRaw, resumeRaw json.RawMessage) (*capsule.Checkpoint, *capsule.Error) {
	if err := g.checkAllStrings(body); err != nil {
		return nil, err
	}
	stop, err := decodeStop(stopRaw)
	if err != nil {
		return nil, err
	}
	cp := &capsule.Checkpoint{Stop: stop}
	if resumeRaw != nil {
		if cp.ResumeResidency, err = decodeBool(resumeRaw, capsule.CodeInvalidField, "resume_residency"); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

func decodeFocus(raw json.RawMessage) (*string, *capsule.Error) {
	s, err := decodeString(raw, capsule.CodeInvalidField, "focus")
	if err != nil {
		return nil, err
	}
	if err := checkText(s, MaxFocus, capsule.CodeInvalidFocus, "focus"); err != nil {
		return nil, err
	}
	return &s, nil
}

func decodeWorkingState(raw json.RawMessage) (*capsule.WorkingState, *capsule.Error) {
	const code, path = capsule.CodeInvalidWorkingState, "working_state"
	ms, err := decodeObject(raw, code, path)
	if err != nil {
		return nil, err
	}
	ws := &capsule.WorkingState{}
	for _, m := range ms {
		p := joinPath(path, m.name)
		switch m.name {
		case "next_action", "last_result":
			s, err := decodeString(m.value, code, p)
			if err != nil {
				return nil, err
			}
			if err := checkText(s, MaxWorkingStateField, code, p); err != nil {
				return nil, err
			}
			if m.name == "next_action" {
				ws.NextAction = &s
			} else {
				ws.LastResult = &s
			}
		case "result_ref", "waiting_for":
			ns, err := decodeNullableString(m.value, code, p)
			if err != nil {
				return nil, err
			}
			limit := MaxWorkingStateField
			if m.name == "result_ref" {
				limit = MaxResultRef
			}
			if err := checkText(ns.Value, limit, code, p); err != nil {
				return nil, err
			}
			if m.name == "result_ref" {
				ws.ResultRef = ns
			} else {
				ws.WaitingFor = ns
			}
		default:
			return nil, unknownField(code, path, m.name)
		}
	}
	if ws.NextAction == nil && ws.LastResult == nil && !ws.ResultRef.Set && !ws.WaitingFor.Set {
		return nil, nil // an empty note changes nothing
	}
	return ws, nil
}

func decodeDecision(raw json.RawMessage) (*capsule.Decision, *capsule.Error) {
	const code, path = capsule.CodeInvalidDecision, "decide"
	ms, err := decodeObject(raw, code, path)
	if err != nil {
		return nil, err
	}
	d := &capsule.Decision{}
	for _, m := range ms {
		p := joinPath(path, m.name)
		var dst *string
		switch m.name {
		case "chosen":
			dst = &d.Chosen
		case "because":
			dst = &d.Because
		case "passed_over":
			dst = &d.PassedOver
		default:
			return nil, unknownField(code, path, m.name)
		}
		s, err := decodeString(m.value, code, p)
		if err != nil {
			return nil, err
		}
		if err := checkText(s, MaxDecisionField, code, p); err != nil {
			return nil, err
		}
		*dst = s
	}
	if strings.TrimSpace(d.Chosen) == "" {
		return nil, capsule.Refuse(code, "decide.chosen", "is required: say what was chosen")
	}
	if n := trimmedLen(d.Because); n < MinBecause {
		return nil, capsule.Refuse(capsule.CodeMotiveRequired, "decide.because",
			"a decision needs a because of at least %d characters; this one has %d", MinBecause, n)
	}
	return d, nil
}

func decodeCommitments(raw json.RawMessage) (*capsule.CommitmentOps, *capsule.Error) {
	const code, path = capsule.CodeInvalidCommitment, "commitments"
	ms, err := decodeObject(raw, code, path)
	if err != nil {
		return nil, err
	}
	ops := &capsule.CommitmentOps{}
	for _, m := range ms {
		p := joinPath(path, m.name)
		if m.name != "open" && m.name != "close" && m.name != "drop" {
			return nil, unknownField(code, path, m.name)
		}
		els, err := decodeArray(m.value, code, p)
		if err != nil {
			return nil, err
		}
		for i, el := range els {
			ip := indexPath(p, i)
			fields, err := decodeObject(el, code, ip)
			if err != nil {
				return nil, err
			}
			var e *capsule.Error
			switch m.name {
			case "open":
				var oc capsule.OpenCommitment
				e = decodeStringFields(fields, code, ip, map[string]*string{"title": &oc.Title})
				ops.Open = append(ops.Open, oc)
			case "close":
				var cc capsule.CloseCommitment
				e = decodeStringFields(fields, code, ip, map[string]*string{"id": &cc.ID, "evidence": &cc.Evidence})
				ops.Close = append(ops.Close, cc)
			case "drop":
				var dc capsule.DropCommitment
				e = decodeStringFields(fields, code, ip, map[string]*string{"id": &dc.ID, "reason": &dc.Reason})
				ops.Drop = append(ops.Drop, dc)
			}
			if e != nil {
				return nil, e
			}
		}
	}
	if err := checkCommitmentOps(ops); err != nil {
		return nil, err
	}
	if ops.IsEmpty() {
		return nil, nil // {} or empty lists change nothing
	}
	return ops, nil
}

// decodeStringFields decodes an object whose members are all strings into
// dst by name, refusing unknown members. A null evidence counts as missing
// so that it gets EVIDENCE_REQUIRED like an absent one.
func decodeStringFields(ms []member, code, path string, dst map[string]*string) *capsule.Error {
	for _, m := range ms {
		p := joinPath(path, m.name)
		ptr, ok := dst[m.name]
		if !ok {
			return unknownField(code, path, m.name)
		}
		if m.name == "evidence" && jsonKind(m.value) == "null" {
			continue
		}
		s, err := decodeString(m.value, code, p)
		if err != nil {
			return err
		}
		*ptr = s
	}
	return nil
}

// checkCommitmentOps applies the seed's commitment rules that need no
// stored state.
func checkCommitmentOps(ops *capsule.CommitmentOps) *capsule.Error {
	const code = capsule.CodeInvalidCommitment
	if len(ops.Open) > MaxOpenCommitments {
		return capsule.Refuse(capsule.CodeTooManyOpenLoops, "commitments.open",
			"opens %d commitments in one checkpoint; at most %d may be open at once", len(ops.Open), MaxOpenCommitments)
	}
	for i, oc := range ops.Open {
		p := indexPath("commitments.open", i) + ".title"
		if err := checkText(oc.Title, MaxCommitmentTitle, code, p); err != nil {
			return err
		}
		if n := trimmedLen(oc.Title); n < MinCommitmentTitle {
			return capsule.Refuse(code, p, "a commitment title needs at least %d characters; this one has %d", MinCommitmentTitle, n)
		}
	}
	seen := map[string]bool{}
	checkID := func(id, p string) *capsule.Error {
		if strings.TrimSpace(id) == "" {
			return capsule.Refuse(code, p, "is required: name the commitment by its id")
		}
		if err := checkText(id, MaxCommitmentID, code, p); err != nil {
			return err
		}
		if seen[id] {
			return capsule.Refuse(code, p, "the same commitment id appears twice in one checkpoint")
		}
		seen[id] = true
		return nil
	}
	for i, cc := range ops.Close {
		p := indexPath("commitments.close", i)
		if err := checkID(cc.ID, p+".id"); err != nil {
			return err
		}
		if !isEvidence(cc.Evidence) {
			return capsule.Refuse(capsule.CodeEvidenceRequired, p+".evidence",
				"closing a commitment needs evidence post:UUID of a live Q-Day message written after it was opened; "+
					"without one, drop it with a reason instead (commitments.drop; continuityd checkpoint --drop ID=REASON)")
		}
	}
	for i, dc := range ops.Drop {
		p := indexPath("commitments.drop", i)
		if err := checkID(dc.ID, p+".id"); err != nil {
			return err
		}
		if err := checkText(dc.Reason, MaxDropReason, code, p+".reason"); err != nil {
			return err
		}
		if n := trimmedLen(dc.Reason); n < MinDropReason {
			return capsule.Refuse(code, p+".reason", "dropping a commitment needs a reason of at least %d characters; this one has %d", MinDropReason, n)
		}
	}
	return nil
}

// isEvidence reports whether s is exactly post:UUID.
func isEvidence(s string) bool {
	rest, ok := strings.CutPrefix(s, "post:")
	return ok && isUUID(rest)
}

func decodeStop(raw json.RawMessage) (*capsule.Stop, *capsule.Error) {
	const code, path = capsule.CodeInvalidStop, "stop"
	ms, err := decodeObject(raw, code, path)
	if err != nil {
		return nil, err
	}
	st := &capsule.Stop{}
	if err := decodeStringFields(ms, code, path, map[string]*string{"reason": &st.Reason}); err != nil {
		return nil, err
	}
	if strings.TrimSpace(st.Reason) == "" {
		return nil, capsule.Refuse(code, "stop.reason", "is required: say why the residency stops")
	}
	if err := checkText(st.Reason, MaxStopReason, code, "stop.reason"); err != nil {
		return nil, err
	}
	return st, nil
}

// checkCheckpointSecrets runs the secret guard over every stored string of
// an accepted checkpoint except the public status, which has its own
// stricter rules (public_status.go).
func (g *Guard) checkCheckpointSecrets(cp *capsule.Checkpoint) *capsule.Error {
	type field struct{ path, value string }
	var fs []field
	add := func(path string, v *string) {
		if v != nil {
			fs = append(fs, field{path, *v})
		}
	}
	add("focus", cp.Focus)
	if ws := cp.WorkingState; ws != nil {
		add("working_state.next_action", ws.NextAction)
		add("working_state.last_result", ws.LastResult)
		add("working_state.result_ref", ws.ResultRef.Ptr())
		add("working_state.waiting_for", ws.WaitingFor.Ptr())
	}
	if d := cp.Decide; d != nil {
		add("decide.chosen", &d.Chosen)
		add("decide.because", &d.Because)
		add("decide.passed_over", &d.PassedOver)
	}
	if ops := cp.Commitments; ops != nil {
		for i := range ops.Open {
			add(indexPath("commitments.open", i)+".title", &ops.Open[i].Title)
		}
		for i := range ops.Close {
			add(indexPath("commitments.close", i)+".id", &ops.Close[i].ID)
		}
		for i := range ops.Drop {
			add(indexPath("commitments.drop", i)+".id", &ops.Drop[i].ID)
			add(indexPath("commitments.drop", i)+".reason", &ops.Drop[i].Reason)
		}
	}
	if cp.Stop != nil {
		add("stop.reason", &cp.Stop.Reason)
	}
	for _, f := range fs {
		if err := g.checkSecret(f.path, f.value); err != nil {
			return err
		}
	}
	return nil
}

// checkAllStrings runs the secret guard over every string value anywhere
// in a well-formed body, whatever its shape, naming each by its path (or
// no path when a key on the way is unsafe to repeat).
func (g *Guard) checkAllStrings(body []byte) *capsule.Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return capsule.Refuse(capsule.CodeInvalidJSON, "", "malformed JSON")
	}
	return g.walkStrings(v, "", false)
}

func (g *Guard) walkStrings(v any, path string, hidden bool) *capsule.Error {
	switch x := v.(type) {
	case string:
		p := path
		if hidden {
			p = ""
		}
		return g.checkSecret(p, x)
	case []any:
		for i, el := range x {
			if err := g.walkStrings(el, indexPath(path, i), hidden); err != nil {
				return err
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic: the same body, the same refusal
		for _, k := range keys {
			if err := g.walkStrings(x[k], joinPath(path, k), hidden || !isSafeName(k)); err != nil {
				return err
			}
		}
	}
	return nil
}
