package residency

import (
	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/daemonside/jsonappend"
)

// The state document, the state a checkpoint answers with, the log's
// write records and the checkpoints in them are encoded by hand: every
// commit encodes the first, every answered commit the second, every write
// the others, and encoding/json spent a tenth of a write's CPU on them
// (its time stamps alone half of that).
// Each function below writes exactly what encoding/json writes for its
// type, field for field in the order of the type's declaration;
// TestEncodersMatchEncodingJSON holds them to it with every field filled
// at random, so a field added to a type and not here fails it.

// encodeDoc is json.Marshal(d).
func encodeDoc(d *doc, buf []byte) ([]byte, error) {
	w := jsonappend.Writer{B: buf, EscapeHTML: true}
	w.BeginObject()
	w.StringField("residency_id", d.ResidencyID)
	w.UintField("seq", d.Seq)
	w.StringField("focus", d.Focus)
	w.Key("focus_updated_at")
	w.TimePtr(d.FocusUpdatedAt)
	w.OmitEmptyString("focus_origin", string(d.FocusOrigin))
	w.Key("working_state")
	writeWorkingState(&w, d.WorkingState)
	w.Key("commitments")
	writeList(&w, d.Commitments, writeCommitment)
	w.UintField("next_commitment", d.NextCommitment)
	w.Key("decisions")
	writeList(&w, d.Decisions, writeDecision)
	w.Key("public_status")
	writePublicStatus(&w, d.PublicStatus)
	w.Key("stopped")
	writeStop(&w, d.Stopped)
	w.Key("receipts")
	w.Strings(d.Receipts)
	if len(d.Plan) > 0 {
		w.Key("plan")
		writeList(&w, d.Plan, writePlanStep)
	}
	if d.PlanAt != nil {
		w.TimeField("plan_at", *d.PlanAt)
	}
	w.Key("since")
	writeSince(&w, &d.Since)
	w.Key("context")
	writeContext(&w, &d.Context)
	w.OmitEmptyString("last_compaction", d.LastCompaction)
	w.Key("last_write_at")
	w.TimePtr(d.LastWriteAt)
	w.Key("refused")
	writeList(&w, d.Refused, writeRefusal)
	w.UintField("capsule_seq", d.CapsuleSeq)
	if d.Unshipped {
		w.Key("unshipped")
		w.Bool(true)
	}
	if d.UnshippedCapsule {
		w.Key("unshipped_capsule")
		w.Bool(true)
	}
	w.Key("dead_letters")
	w.StringIntMap(d.DeadLetters)
	w.EndObject()
	return w.B, w.Err()
}

// encodeSavedState is an Encoder's encoding of st without HTML escaping and
// without its trailing newline: the state a checkpoint answers with.
func encodeSavedState(st *savedState, buf []byte) ([]byte, error) {
	w := jsonappend.Writer{B: buf}
	writeResume(&w, &st.Resume, false, nil)
	// savedState's own fields, which hide the Resume's, come last; they
	// are never set.
	if st.Snapshot != nil {
		w.Key("snapshot")
		w.Value(st.Snapshot)
	}
	if len(st.Upstreams) > 0 {
		w.Key("upstreams")
		w.Value(st.Upstreams)
	}
	w.EndObject()
	return w.B, w.Err()
}

// EncodeResume appends to buf what a json.Encoder without HTML escaping
// writes for r, trailing newline included: the resume answer. Every resume
// is encoded, and encoding/json's reflection was most of the CPU its
// answer took.
func EncodeResume(r *capsule.Resume, buf []byte) ([]byte, error) {
	w := jsonappend.Writer{B: buf}
	writeResume(&w, r, true, nil)
	w.EndObject()
	w.B = append(w.B, '\n')
	return w.B, w.Err()
}

// writeResume writes r's fields in their order, leaving the object open;
// without full, "snapshot" and "upstreams" are left out (the residency
// does not know them: savedState hides them). With sl, it records where
// the values the agent fills at read time are (see ResumeAnswer).
func writeResume(w *jsonappend.Writer, r *capsule.Resume, full bool, sl *slots) {
	w.BeginObject()
	w.StringField("agent", r.Agent)
	w.UintField("seq", r.Seq)
	w.StringField("focus", r.Focus)
	w.Key("focus_updated_at")
	w.TimePtr(r.FocusUpdatedAt)
	w.Key("working_state")
	writeWorkingState(w, r.WorkingState)
	w.Key("commitments")
	writeList(w, r.Commitments, writeCommitment)
	w.Key("decisions")
	writeList(w, r.Decisions, writeDecision)
	w.Key("public_status")
	writePublicStatus(w, r.PublicStatus)
	w.Key("stopped")
	writeStop(w, r.Stopped)
	w.Key("capsule")
	if r.Capsule == nil {
		w.Null()
	} else {
		w.Value(r.Capsule) // rare on this path, and a schema of its own
	}
	w.Key("receipts")
	w.Strings(r.Receipts)
	w.Key("plan")
	writeList(w, r.Plan, writePlanStep)
	if r.PlanUpdatedAt != nil {
		w.TimeField("plan_updated_at", *r.PlanUpdatedAt)
	}
	if full {
		w.Key("snapshot")
		sl.begin(slotSnapshot, w)
		writeSnapshotRef(w, r.Snapshot)
		sl.end(slotSnapshot, w)
	}
	w.Key("since_last_visit")
	writeSinceLastVisit(w, &r.SinceLastVisit, sl)
	w.Key("context")
	writeContext(w, &r.Context)
	w.Key("last_write_at")
	w.TimePtr(r.LastWriteAt)
	w.Key("refused")
	writeList(w, r.Refused, writeRefusal)
	if full {
		w.Key("upstreams")
		sl.begin(slotUpstreams, w)
		writeList(w, r.Upstreams, writeUpstreamState)
		sl.end(slotUpstreams, w)
	}
	w.Key("degraded")
	sl.begin(slotDegraded, w)
	w.Strings(r.Degraded)
	sl.end(slotDegraded, w)
	w.Key("directions")
	if len(r.Directions) == 0 {
		writeList(w, r.Directions, nil) // null or [], as the slice is
	} else {
		w.Value(r.Directions)
	}
	if len(r.Remote) > 0 {
		w.Key("remote")
		w.Value(r.Remote)
	}
	if r.RestoredFrom != nil {
		w.Key("restored_from")
		w.Value(r.RestoredFrom)
	}
	if len(r.FleetConflict) > 0 {
		w.Key("fleet_conflict")
		w.Value(r.FleetConflict)
	}
	if r.FleetHandover != nil {
		w.Key("fleet_handover")
		w.Value(r.FleetHandover)
	}
	w.Key("conflicts")
	sl.begin(slotConflicts, w)
	writeConflicts(w, r.Conflicts)
	sl.end(slotConflicts, w)
	if len(r.WorkLost) > 0 {
		w.Key("work_lost")
		w.Value(r.WorkLost)
	}
	if r.RestoreInterrupted != nil {
		w.Key("restore_interrupted")
		w.Value(r.RestoreInterrupted)
	}
}

func writeSnapshotRef(w *jsonappend.Writer, s *capsule.SnapshotRef) {
	if s == nil {
		w.Null()
		return
	}
	w.BeginObject()
	w.StringField("id", s.ID)
	w.TimeField("at", s.At)
	w.StringField("trigger", s.Trigger)
	w.IntField("files", s.Files)
	w.EndObject()
}

func writeByOther(w *jsonappend.Writer, b *capsule.ByOther) {
	w.BeginObject()
	w.StringField("path", b.Path)
	w.StringField("by", b.By)
	w.EndObject()
}

func writeConflicts(w *jsonappend.Writer, cs []capsule.PathConflict) {
	if len(cs) == 0 {
		writeList(w, cs, nil) // null or [], as the slice is
	} else {
		w.Value(cs)
	}
}

func writeUpstreamState(w *jsonappend.Writer, u *capsule.UpstreamState) {
	w.BeginObject()
	w.StringField("name", u.Name)
	w.StringField("kind", u.Kind)
	w.StringField("state", u.State)
	w.IntField("pending", u.Pending)
	w.IntField("dead_letter", u.DeadLetter)
	w.UintField("delivered_seq", u.Delivered)
	w.Key("last_error")
	if u.LastError == nil {
		w.Null()
	} else {
		w.String(*u.LastError)
	}
	w.Key("last_success")
	w.TimePtr(u.LastSuccess)
	w.Key("next_attempt")
	w.TimePtr(u.NextAttempt)
	w.EndObject()
}

// encodeWriteRecord is json.Marshal(w) with w.Checkpoint's encoding given
// (cpJSON, from json.Marshal): the log's record of a checkpoint write. ok
// is false, and nothing encoded, without cpJSON or for a write with more
// than a checkpoint, which the caller encodes whole.
func encodeWriteRecord(wr *capsule.Write, cpJSON []byte) (raw []byte, ok bool, err error) {
	if cpJSON == nil || wr.Checkpoint == nil || wr.Capsule != nil || wr.Work != nil || wr.CoveredFrom != 0 || wr.SessionID != "" || wr.Reason != "" {
		return nil, false, nil
	}
	w := jsonappend.Writer{B: make([]byte, 0, 160+len(cpJSON)), EscapeHTML: true}
	w.BeginObject()
	w.UintField("seq", wr.Seq)
	w.StringField("kind", string(wr.Kind))
	w.StringField("origin", string(wr.Origin))
	w.TimeField("at", wr.At)
	w.StringField("idempotency_key", wr.IdempotencyKey)
	w.Key("checkpoint")
	w.Raw(cpJSON)
	w.EndObject()
	return w.B, true, w.Err()
}

// encodeCheckpoint is json.Marshal(cp).
func encodeCheckpoint(cp *capsule.Checkpoint) ([]byte, error) {
	w := jsonappend.Writer{B: make([]byte, 0, 256), EscapeHTML: true}
	w.BeginObject()
	if cp.Focus != nil {
		w.StringField("focus", *cp.Focus)
	}
	if ws := cp.WorkingState; ws != nil {
		w.Key("working_state")
		w.BeginObject()
		if ws.NextAction != nil {
			w.StringField("next_action", *ws.NextAction)
		}
		if ws.LastResult != nil {
			w.StringField("last_result", *ws.LastResult)
		}
		writeNullable(&w, "result_ref", ws.ResultRef)
		writeNullable(&w, "waiting_for", ws.WaitingFor)
		w.EndObject()
	}
	if d := cp.Decide; d != nil {
		w.Key("decide")
		w.BeginObject()
		w.StringField("chosen", d.Chosen)
		w.StringField("because", d.Because)
		w.OmitEmptyString("passed_over", d.PassedOver)
		w.EndObject()
	}
	// The public status and commitments are rarer, and hold raw messages
	// and lists: encoding/json writes them.
	if cp.PublicStatus != nil {
		w.Key("public_status")
		w.Value(cp.PublicStatus)
	}
	if cp.Commitments != nil {
		w.Key("commitments")
		w.Value(cp.Commitments)
	}
	if cp.Stop != nil {
		w.Key("stop")
		w.BeginObject()
		w.StringField("reason", cp.Stop.Reason)
		w.EndObject()
	}
	if cp.ResumeResidency {
		w.Key("resume_residency")
		w.Bool(true)
	}
	w.EndObject()
	return w.B, w.Err()
}

// writeNullable writes a NullableString member as its MarshalJSON and
// omitzero do: absent when not set, null, or the string.
func writeNullable(w *jsonappend.Writer, name string, n capsule.NullableString) {
	if !n.Set {
		return
	}
	w.Key(name)
	if !n.Valid {
		w.Null()
		return
	}
	w.String(n.Value)
}

// writeList writes xs with each, null for nil as encoding/json has it.
func writeList[T any](w *jsonappend.Writer, xs []T, each func(*jsonappend.Writer, *T)) {
	if xs == nil {
		w.Null()
		return
	}
	w.BeginArray()
	for i := range xs {
		w.Elem()
		each(w, &xs[i])
	}
	w.EndArray()
}

func writeWorkingState(w *jsonappend.Writer, ws *capsule.WorkingStateRecord) {
	if ws == nil {
		w.Null()
		return
	}
	w.BeginObject()
	w.StringField("next_action", ws.NextAction)
	w.StringField("last_result", ws.LastResult)
	w.Key("result_ref")
	w.StringPtr(ws.ResultRef)
	w.Key("waiting_for")
	w.StringPtr(ws.WaitingFor)
	w.TimeField("updated_at", ws.UpdatedAt)
	w.StringField("origin", string(ws.Origin))
	w.OmitEmptyString("lost", ws.Lost)
	w.EndObject()
}

func writeCommitment(w *jsonappend.Writer, c *capsule.Commitment) {
	w.BeginObject()
	w.StringField("id", c.ID)
	w.StringField("title", c.Title)
	w.StringField("status", c.Status)
	w.TimeField("opened_at", c.OpenedAt)
	w.OmitEmptyString("evidence", c.Evidence)
	w.OmitEmptyString("reason", c.Reason)
	w.Key("history")
	writeList(w, c.History, writeCommitmentEvent)
	w.EndObject()
}

func writeCommitmentEvent(w *jsonappend.Writer, e *capsule.CommitmentEvent) {
	w.BeginObject()
	w.TimeField("at", e.At)
	w.StringField("action", e.Action)
	w.UintField("seq", e.Seq)
	w.OmitEmptyString("detail", e.Detail)
	w.EndObject()
}

func writeDecision(w *jsonappend.Writer, d *capsule.DecisionRecord) {
	w.BeginObject()
	w.StringField("chosen", d.Chosen)
	w.StringField("because", d.Because)
	w.OmitEmptyString("passed_over", d.PassedOver)
	w.TimeField("at", d.At)
	w.UintField("seq", d.Seq)
	w.EndObject()
}

func writePublicStatus(w *jsonappend.Writer, p *capsule.PublicStatusRecord) {
	if p == nil {
		w.Null()
		return
	}
	w.BeginObject()
	w.StringField("phase", p.Phase)
	w.StringField("next_action", p.NextAction)
	w.OmitEmptyString("reason", p.Reason)
	if len(p.Until) > 0 {
		w.Key("until")
		w.Value(p.Until) // compacted, as encoding/json does a raw message
	}
	w.OmitEmptyString("tool", p.Tool)
	w.OmitEmptyString("route", p.Route)
	w.OmitEmptyString("experiment", p.Experiment)
	w.TimeField("updated_at", p.UpdatedAt)
	w.EndObject()
}

func writeStop(w *jsonappend.Writer, s *capsule.StopRecord) {
	if s == nil {
		w.Null()
		return
	}
	w.BeginObject()
	w.StringField("reason", s.Reason)
	w.TimeField("at", s.At)
	w.EndObject()
}

func writePlanStep(w *jsonappend.Writer, s *capsule.PlanStep) {
	w.BeginObject()
	w.StringField("step", s.Step)
	w.StringField("status", s.Status)
	w.OmitEmptyString("lost", s.Lost)
	w.EndObject()
}

func writeSince(w *jsonappend.Writer, s *since) {
	w.BeginObject()
	w.TimeField("at", s.At)
	w.IntField("writes_total", s.WritesTotal)
	w.IntField("writes_base", s.WritesBase)
	w.IntField("paths_total", s.PathsTotal)
	w.IntField("paths_base", s.PathsBase)
	w.Key("paths")
	writeList(w, s.Paths, func(w *jsonappend.Writer, p *seqPath) {
		w.BeginObject()
		w.UintField("seq", p.Seq)
		w.StringField("v", p.V)
		if p.N != 0 {
			w.IntField("n", p.N)
		}
		if p.First != 0 {
			w.UintField("first", p.First)
		}
		w.EndObject()
	})
	w.Key("commits")
	writeList(w, s.Commits, func(w *jsonappend.Writer, c *seqString) {
		w.BeginObject()
		w.UintField("seq", c.Seq)
		w.StringField("v", c.V)
		w.EndObject()
	})
	w.Key("signals")
	writeList(w, s.Signals, func(w *jsonappend.Writer, n *seqSignal) {
		w.BeginObject()
		w.UintField("seq", n.Seq)
		w.Key("note")
		writeSignalNote(w, &n.Note)
		w.EndObject()
	})
	if len(s.Head) > 0 {
		w.Key("head")
		writeList(w, s.Head, func(w *jsonappend.Writer, h *seqHead) {
			w.BeginObject()
			w.UintField("seq", h.Seq)
			w.Key("move")
			writeHeadMove(w, &h.Move)
			w.EndObject()
		})
	}
	w.EndObject()
}

func writeSinceLastVisit(w *jsonappend.Writer, s *capsule.SinceLastVisit, sl *slots) {
	w.BeginObject()
	w.TimeField("since", s.Since)
	w.IntField("writes", s.Writes)
	w.Key("paths")
	w.Strings(s.Paths)
	w.IntField("path_count", s.PathCount)
	w.Key("path_counts")
	w.StringIntMap(s.PathCounts)
	w.Key("commits")
	w.Strings(s.Commits)
	w.Key("signals")
	writeList(w, s.Signals, writeSignalNote)
	w.Key("by_others")
	sl.begin(slotByOthers, w)
	writeList(w, s.ByOthers, writeByOther)
	sl.end(slotByOthers, w)
	w.Key("head")
	writeList(w, s.Head, writeHeadMove)
	w.EndObject()
}

func writeSignalNote(w *jsonappend.Writer, n *capsule.SignalNote) {
	w.BeginObject()
	w.TimeField("at", n.At)
	w.StringField("kind", n.Kind)
	w.StringField("summary", n.Summary)
	w.EndObject()
}

func writeHeadMove(w *jsonappend.Writer, h *capsule.HeadMove) {
	w.BeginObject()
	w.TimeField("at", h.At)
	w.StringField("kind", h.Kind)
	w.StringField("repo", h.Repo)
	w.StringField("branch", h.Branch)
	w.OmitEmptyString("prev_branch", h.PrevBranch)
	w.StringField("from", h.From)
	w.StringField("to", h.To)
	w.StringField("summary", h.Summary)
	w.EndObject()
}

func writeContext(w *jsonappend.Writer, c *capsule.ContextState) {
	w.BeginObject()
	w.Key("used_fraction")
	if c.UsedFraction == nil {
		w.Null()
	} else {
		w.Value(*c.UsedFraction) // encoding/json's float notation
	}
	w.OmitEmptyString("via", c.Via)
	w.IntField("compactions", c.Compactions)
	w.OmitEmptyString("session_id", c.SessionID)
	w.OmitEmptyString("session", c.Session)
	w.Key("updated_at")
	w.TimePtr(c.UpdatedAt)
	w.EndObject()
}

func writeRefusal(w *jsonappend.Writer, r *capsule.Refusal) {
	w.BeginObject()
	w.StringField("source", r.Source)
	w.OmitEmptyString("machine", r.Machine)
	w.TimeField("at", r.At)
	w.Key("error")
	w.BeginObject()
	w.StringField("code", r.Error.Code)
	w.OmitEmptyString("field", r.Error.Field)
	w.StringField("message", r.Error.Message)
	w.EndObject()
	w.EndObject()
}
