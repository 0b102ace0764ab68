package residency

import (
	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/jsonappend"
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
	w.Key("residency_id")
	w.String(d.ResidencyID)
	w.Key("seq")
	w.Uint(d.Seq)
	w.Key("focus")
	w.String(d.Focus)
	w.Key("focus_updated_at")
	w.TimePtr(d.FocusUpdatedAt)
	if d.FocusOrigin != "" {
		w.Key("focus_origin")
		w.String(string(d.FocusOrigin))
	}
	w.Key("working_state")
	writeWorkingState(&w, d.WorkingState)
	w.Key("commitments")
	writeList(&w, d.Commitments, writeCommitment)
	w.Key("next_commitment")
	w.Uint(d.NextCommitment)
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
		w.Key("plan_at")
		w.Time(*d.PlanAt)
	}
	w.Key("since")
	writeSince(&w, &d.Since)
	w.Key("context")
	writeContext(&w, &d.Context)
	if d.LastCompaction != "" {
		w.Key("last_compaction")
		w.String(d.LastCompaction)
	}
	w.Key("last_write_at")
	w.TimePtr(d.LastWriteAt)
	w.Key("refused")
	writeList(&w, d.Refused, writeRefusal)
	w.Key("capsule_seq")
	w.Uint(d.CapsuleSeq)
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
	r := &st.Resume
	w.BeginObject()
	w.Key("agent")
	w.String(r.Agent)
	w.Key("seq")
	w.Uint(r.Seq)
	w.Key("focus")
	w.String(r.Focus)
	w.Key("focus_updated_at")
	w.TimePtr(r.FocusUpdatedAt)
	w.Key("working_state")
	writeWorkingState(&w, r.WorkingState)
	w.Key("commitments")
	writeList(&w, r.Commitments, writeCommitment)
	w.Key("decisions")
	writeList(&w, r.Decisions, writeDecision)
	w.Key("public_status")
	writePublicStatus(&w, r.PublicStatus)
	w.Key("stopped")
	writeStop(&w, r.Stopped)
	w.Key("capsule")
	if r.Capsule == nil {
		w.Null()
	} else {
		w.Value(r.Capsule) // rare on this path, and a schema of its own
	}
	w.Key("receipts")
	w.Strings(r.Receipts)
	w.Key("plan")
	writeList(&w, r.Plan, writePlanStep)
	if r.PlanUpdatedAt != nil {
		w.Key("plan_updated_at")
		w.Time(*r.PlanUpdatedAt)
	}
	// "snapshot": hidden by savedState's own field.
	w.Key("since_last_visit")
	writeSinceLastVisit(&w, &r.SinceLastVisit)
	w.Key("context")
	writeContext(&w, &r.Context)
	w.Key("last_write_at")
	w.TimePtr(r.LastWriteAt)
	w.Key("refused")
	writeList(&w, r.Refused, writeRefusal)
	// "upstreams": hidden as "snapshot" is.
	w.Key("degraded")
	w.Strings(r.Degraded)
	w.Key("directions")
	if len(r.Directions) == 0 {
		writeList(&w, r.Directions, nil) // null or [], as the slice is
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
	w.Key("conflicts")
	if len(r.Conflicts) == 0 {
		writeList(&w, r.Conflicts, nil)
	} else {
		w.Value(r.Conflicts)
	}
	if len(r.WorkLost) > 0 {
		w.Key("work_lost")
		w.Value(r.WorkLost)
	}
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
	w.Key("seq")
	w.Uint(wr.Seq)
	w.Key("kind")
	w.String(string(wr.Kind))
	w.Key("origin")
	w.String(string(wr.Origin))
	w.Key("at")
	w.Time(wr.At)
	w.Key("idempotency_key")
	w.String(wr.IdempotencyKey)
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
		w.Key("focus")
		w.String(*cp.Focus)
	}
	if ws := cp.WorkingState; ws != nil {
		w.Key("working_state")
		w.BeginObject()
		if ws.NextAction != nil {
			w.Key("next_action")
			w.String(*ws.NextAction)
		}
		if ws.LastResult != nil {
			w.Key("last_result")
			w.String(*ws.LastResult)
		}
		writeNullable(&w, "result_ref", ws.ResultRef)
		writeNullable(&w, "waiting_for", ws.WaitingFor)
		w.EndObject()
	}
	if d := cp.Decide; d != nil {
		w.Key("decide")
		w.BeginObject()
		w.Key("chosen")
		w.String(d.Chosen)
		w.Key("because")
		w.String(d.Because)
		if d.PassedOver != "" {
			w.Key("passed_over")
			w.String(d.PassedOver)
		}
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
		w.Key("reason")
		w.String(cp.Stop.Reason)
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
	w.Key("next_action")
	w.String(ws.NextAction)
	w.Key("last_result")
	w.String(ws.LastResult)
	w.Key("result_ref")
	w.StringPtr(ws.ResultRef)
	w.Key("waiting_for")
	w.StringPtr(ws.WaitingFor)
	w.Key("updated_at")
	w.Time(ws.UpdatedAt)
	w.Key("origin")
	w.String(string(ws.Origin))
	w.EndObject()
}

func writeCommitment(w *jsonappend.Writer, c *capsule.Commitment) {
	w.BeginObject()
	w.Key("id")
	w.String(c.ID)
	w.Key("title")
	w.String(c.Title)
	w.Key("status")
	w.String(c.Status)
	w.Key("opened_at")
	w.Time(c.OpenedAt)
	if c.Evidence != "" {
		w.Key("evidence")
		w.String(c.Evidence)
	}
	if c.Reason != "" {
		w.Key("reason")
		w.String(c.Reason)
	}
	w.Key("history")
	writeList(w, c.History, writeCommitmentEvent)
	w.EndObject()
}

func writeCommitmentEvent(w *jsonappend.Writer, e *capsule.CommitmentEvent) {
	w.BeginObject()
	w.Key("at")
	w.Time(e.At)
	w.Key("action")
	w.String(e.Action)
	w.Key("seq")
	w.Uint(e.Seq)
	if e.Detail != "" {
		w.Key("detail")
		w.String(e.Detail)
	}
	w.EndObject()
}

func writeDecision(w *jsonappend.Writer, d *capsule.DecisionRecord) {
	w.BeginObject()
	w.Key("chosen")
	w.String(d.Chosen)
	w.Key("because")
	w.String(d.Because)
	if d.PassedOver != "" {
		w.Key("passed_over")
		w.String(d.PassedOver)
	}
	w.Key("at")
	w.Time(d.At)
	w.Key("seq")
	w.Uint(d.Seq)
	w.EndObject()
}

func writePublicStatus(w *jsonappend.Writer, p *capsule.PublicStatusRecord) {
	if p == nil {
		w.Null()
		return
	}
	w.BeginObject()
	w.Key("phase")
	w.String(p.Phase)
	w.Key("next_action")
	w.String(p.NextAction)
	if p.Reason != "" {
		w.Key("reason")
		w.String(p.Reason)
	}
	if len(p.Until) > 0 {
		w.Key("until")
		w.Value(p.Until) // compacted, as encoding/json does a raw message
	}
	if p.Tool != "" {
		w.Key("tool")
		w.String(p.Tool)
	}
	if p.Route != "" {
		w.Key("route")
		w.String(p.Route)
	}
	if p.Experiment != "" {
		w.Key("experiment")
		w.String(p.Experiment)
	}
	w.Key("updated_at")
	w.Time(p.UpdatedAt)
	w.EndObject()
}

func writeStop(w *jsonappend.Writer, s *capsule.StopRecord) {
	if s == nil {
		w.Null()
		return
	}
	w.BeginObject()
	w.Key("reason")
	w.String(s.Reason)
	w.Key("at")
	w.Time(s.At)
	w.EndObject()
}

func writePlanStep(w *jsonappend.Writer, s *capsule.PlanStep) {
	w.BeginObject()
	w.Key("step")
	w.String(s.Step)
	w.Key("status")
	w.String(s.Status)
	w.EndObject()
}

func writeSince(w *jsonappend.Writer, s *since) {
	w.BeginObject()
	w.Key("at")
	w.Time(s.At)
	w.Key("writes_total")
	w.Int(int64(s.WritesTotal))
	w.Key("writes_base")
	w.Int(int64(s.WritesBase))
	w.Key("paths_total")
	w.Int(int64(s.PathsTotal))
	w.Key("paths_base")
	w.Int(int64(s.PathsBase))
	w.Key("paths")
	writeList(w, s.Paths, func(w *jsonappend.Writer, p *seqPath) {
		w.BeginObject()
		w.Key("seq")
		w.Uint(p.Seq)
		w.Key("v")
		w.String(p.V)
		if p.N != 0 {
			w.Key("n")
			w.Int(int64(p.N))
		}
		if p.First != 0 {
			w.Key("first")
			w.Uint(p.First)
		}
		w.EndObject()
	})
	w.Key("commits")
	writeList(w, s.Commits, func(w *jsonappend.Writer, c *seqString) {
		w.BeginObject()
		w.Key("seq")
		w.Uint(c.Seq)
		w.Key("v")
		w.String(c.V)
		w.EndObject()
	})
	w.Key("signals")
	writeList(w, s.Signals, func(w *jsonappend.Writer, n *seqSignal) {
		w.BeginObject()
		w.Key("seq")
		w.Uint(n.Seq)
		w.Key("note")
		writeSignalNote(w, &n.Note)
		w.EndObject()
	})
	if len(s.Head) > 0 {
		w.Key("head")
		writeList(w, s.Head, func(w *jsonappend.Writer, h *seqHead) {
			w.BeginObject()
			w.Key("seq")
			w.Uint(h.Seq)
			w.Key("move")
			writeHeadMove(w, &h.Move)
			w.EndObject()
		})
	}
	w.EndObject()
}

func writeSinceLastVisit(w *jsonappend.Writer, s *capsule.SinceLastVisit) {
	w.BeginObject()
	w.Key("since")
	w.Time(s.Since)
	w.Key("writes")
	w.Int(int64(s.Writes))
	w.Key("paths")
	w.Strings(s.Paths)
	w.Key("path_count")
	w.Int(int64(s.PathCount))
	w.Key("path_counts")
	w.StringIntMap(s.PathCounts)
	w.Key("commits")
	w.Strings(s.Commits)
	w.Key("signals")
	writeList(w, s.Signals, writeSignalNote)
	w.Key("by_others")
	writeList(w, s.ByOthers, func(w *jsonappend.Writer, b *capsule.ByOther) {
		w.BeginObject()
		w.Key("path")
		w.String(b.Path)
		w.Key("by")
		w.String(b.By)
		w.EndObject()
	})
	w.Key("head")
	writeList(w, s.Head, writeHeadMove)
	w.EndObject()
}

func writeSignalNote(w *jsonappend.Writer, n *capsule.SignalNote) {
	w.BeginObject()
	w.Key("at")
	w.Time(n.At)
	w.Key("kind")
	w.String(n.Kind)
	w.Key("summary")
	w.String(n.Summary)
	w.EndObject()
}

func writeHeadMove(w *jsonappend.Writer, h *capsule.HeadMove) {
	w.BeginObject()
	w.Key("at")
	w.Time(h.At)
	w.Key("kind")
	w.String(h.Kind)
	w.Key("repo")
	w.String(h.Repo)
	w.Key("branch")
	w.String(h.Branch)
	if h.PrevBranch != "" {
		w.Key("prev_branch")
		w.String(h.PrevBranch)
	}
	w.Key("from")
	w.String(h.From)
	w.Key("to")
	w.String(h.To)
	w.Key("summary")
	w.String(h.Summary)
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
	w.Key("compactions")
	w.Int(int64(c.Compactions))
	if c.SessionID != "" {
		w.Key("session_id")
		w.String(c.SessionID)
	}
	if c.Session != "" {
		w.Key("session")
		w.String(c.Session)
	}
	w.Key("updated_at")
	w.TimePtr(c.UpdatedAt)
	w.EndObject()
}

func writeRefusal(w *jsonappend.Writer, r *capsule.Refusal) {
	w.BeginObject()
	w.Key("source")
	w.String(r.Source)
	if r.Machine != "" {
		w.Key("machine")
		w.String(r.Machine)
	}
	w.Key("at")
	w.Time(r.At)
	w.Key("error")
	w.BeginObject()
	w.Key("code")
	w.String(r.Error.Code)
	if r.Error.Field != "" {
		w.Key("field")
		w.String(r.Error.Field)
	}
	w.Key("message")
	w.String(r.Error.Message)
	w.EndObject()
	w.EndObject()
}
