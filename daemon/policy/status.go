package policy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// observe learns from the stored state what the agent wrote itself, and
// when: the policy remembers what it wrote, so anything else is the
// agent's.
func (p *Policy) observe(st capsule.Resume) {
	p.stopped = st.Stopped != nil
	if t := st.FocusUpdatedAt; t != nil && !t.Equal(p.ourFocusAt) && t.After(p.agentFocusAt) {
		p.agentFocusAt = *t
	}
	if ws := st.WorkingState; ws != nil && ws.Origin != capsule.OriginAutomatic && ws.UpdatedAt.After(p.agentWSAt) {
		p.agentWSAt = ws.UpdatedAt
	}
	if ps := st.PublicStatus; ps != nil {
		if ps.UpdatedAt.After(p.lastPSAt) {
			p.lastPSAt = ps.UpdatedAt
		}
		ours := p.lastSent != nil && equalStatus(&ps.PublicStatus, p.lastSent)
		if !ours && (p.agentPS == nil || ps.UpdatedAt.After(p.agentPSAt)) {
			s := cloneStatus(&ps.PublicStatus)
			p.agentPS, p.agentPSAt = s, ps.UpdatedAt
		}
	}
	if c := st.Capsule; c != nil && c.Seq != p.ourCapsuleSeq && c.StoredAt.After(p.agentCapsuleAt) {
		p.agentCapsuleAt = c.StoredAt
	}
}

// targetStatus is the public status the policy stands for now, or nil when
// it knows none. It never carries a private field.
func (p *Policy) targetStatus(st capsule.Resume, now time.Time) *capsule.PublicStatus {
	if p.phase == "" || (p.agentPS != nil && p.agentPSAt.After(p.phaseAt)) {
		// The agent's own word is newer than anything the policy saw
		// happen: it stands as written.
		if p.agentPS != nil {
			return cloneStatus(p.agentPS)
		}
		if st.PublicStatus != nil {
			return cloneStatus(&st.PublicStatus.PublicStatus)
		}
		return nil
	}
	t := &capsule.PublicStatus{Phase: p.phase, NextAction: neutralText[p.phase]}
	if a := p.agentPS; a != nil {
		t.Tool, t.Route, t.Experiment = a.Tool, a.Route, a.Experiment
		if a.Phase == p.phase {
			// What the agent said about this phase is still true of it.
			if !isNeutral(a.NextAction) && a.NextAction != "" {
				t.NextAction = a.NextAction
			}
			t.Reason = a.Reason
			if len(a.Until) > 0 && !untilPassed(a.Until, now) {
				t.Until = append(json.RawMessage(nil), a.Until...)
			}
		}
	}
	return t
}

func isNeutral(s string) bool {
	return s == TextActing || s == TextWaiting || s == TextResting
}

func cloneStatus(s *capsule.PublicStatus) *capsule.PublicStatus {
	c := *s
	c.Until = append(json.RawMessage(nil), s.Until...)
	if len(c.Until) == 0 {
		c.Until = nil
	}
	return &c
}

func equalStatus(a, b *capsule.PublicStatus) bool {
	return a.Phase == b.Phase && a.NextAction == b.NextAction && a.Reason == b.Reason &&
		a.Tool == b.Tool && a.Route == b.Route && a.Experiment == b.Experiment &&
		bytes.Equal(bytes.TrimSpace(a.Until), bytes.TrimSpace(b.Until))
}

// untilPassed reports whether an until (an ISO time as a JSON string, or
// epoch milliseconds) is before now. One it cannot read has not passed.
func untilPassed(raw json.RawMessage, now time.Time) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return false
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.Before(now)
			}
		}
		return false
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return false
	}
	return time.UnixMilli(ms).Before(now)
}

// derivedInto adds to cp the pending derived fields that may be applied:
// newer than the agent's own write of that part and different from what is
// stored. Fields that may never apply are dropped. The returned func
// consumes the added ones, once the checkpoint is stored.
func (p *Policy) derivedInto(cp *capsule.Checkpoint, st capsule.Resume) func() {
	var added []*pendingField
	take := func(f *pendingField, agentAt time.Time, differs func(string) bool) *string {
		if f.val == nil {
			return nil
		}
		v := *f.val
		if !f.at.After(agentAt) || !differs(v) {
			f.val = nil // the agent's own write is newer, or it is already stored
			return nil
		}
		added = append(added, f)
		return &v
	}
	cp.Focus = take(&p.pend.focus, p.agentFocusAt, func(v string) bool { return v != "" && v != st.Focus })

	cur := st.WorkingState
	if cur == nil {
		cur = &capsule.WorkingStateRecord{}
	}
	var ws capsule.WorkingState
	ws.NextAction = take(&p.pend.next, p.agentWSAt, func(v string) bool { return v != "" && v != cur.NextAction })
	ws.LastResult = take(&p.pend.last, p.agentWSAt, func(v string) bool { return v != "" && v != cur.LastResult })
	if v := take(&p.pend.waiting, p.agentWSAt, func(v string) bool {
		if cur.WaitingFor == nil {
			return v != ""
		}
		return v != *cur.WaitingFor
	}); v != nil {
		ws.WaitingFor = capsule.NullableString{Set: true, Valid: *v != "", Value: *v}
	}
	if ws.NextAction != nil || ws.LastResult != nil || ws.WaitingFor.Set {
		cp.WorkingState = &ws
	}
	return func() {
		for _, f := range added {
			f.val = nil
		}
	}
}

// capsuleDraft returns the pending capsule draft when it may be stored:
// newer than the agent's own latest capsule, and different from the stored
// one. A draft that may never be stored is dropped.
func (p *Policy) capsuleDraft(st capsule.Resume) *capsule.Capsule {
	c := p.pend.capsule
	if c == nil {
		return nil
	}
	if rec := st.Capsule; rec != nil && (!p.pend.capsuleAt.After(p.agentCapsuleAt) || equalCapsule(&rec.Capsule, c)) {
		p.pend.capsule = nil
		return nil
	}
	return c
}

func equalCapsule(a, b *capsule.Capsule) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
