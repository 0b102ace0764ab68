package qdaytest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

// maxDecisions is how many decisions a residency keeps (the last ones).
const maxDecisions = 5

// residency is one token's saved state. The Server's mutex guards it.
type residency struct {
	focus        *string
	working      workingState
	hasWorking   bool
	commitments  []commitment // every one ever opened; the record stays
	decisions    []decision
	publicStatus *publicStatus
	stopped      bool
	stopReason   string
	updatedAt    time.Time
}

type workingState struct {
	NextAction *string   `json:"next_action"`
	LastResult *string   `json:"last_result"`
	ResultRef  *string   `json:"result_ref"`
	WaitingFor *string   `json:"waiting_for"`
	UpdatedAt  time.Time `json:"updated_at"`
}

type commitment struct {
	ID       string     `json:"id"`
	Title    string     `json:"title"`
	State    string     `json:"state"` // open, closed, dropped
	OpenedAt time.Time  `json:"opened_at"`
	EndedAt  *time.Time `json:"ended_at,omitempty"`
	Evidence string     `json:"evidence,omitempty"`
	Reason   string     `json:"reason,omitempty"`
}

type decision struct {
	capsule.Decision
	At time.Time `json:"at"`
}

type publicStatus struct {
	*capsule.PublicStatus
	UpdatedAt time.Time `json:"updated_at"`
}

// apply applies a checkpoint the guard accepted, all or nothing: the
// stateful rules are checked on the side before anything changes.
func (rz *residency) apply(cp *capsule.Checkpoint, now time.Time, nextID *int) *capsule.Error {
	if rz.stopped && !cp.ResumeResidency {
		return capsule.Refuse(capsule.CodeResidencyStopped, "",
			"the residency is stopped; only a checkpoint with resume_residency: true lifts it")
	}
	if cp.Stop != nil { // a stop ignores every other field
		rz.stopped, rz.stopReason, rz.updatedAt = true, cp.Stop.Reason, now
		return nil
	}

	// Commitments first, on a copy, so a refusal changes nothing.
	commitments := append([]commitment(nil), rz.commitments...)
	if ops := cp.Commitments; ops != nil {
		find := func(id, path string) (int, *capsule.Error) {
			for i := range commitments {
				if commitments[i].ID == id && commitments[i].State == "open" {
					return i, nil
				}
			}
			return -1, capsule.Refuse(capsule.CodeUnknownCommitment, path, "no open commitment has this id")
		}
		for i, c := range ops.Close {
			j, err := find(c.ID, fmt.Sprintf("commitments.close[%d].id", i))
			if err != nil {
				return err
			}
			t := now
			commitments[j].State, commitments[j].EndedAt, commitments[j].Evidence = "closed", &t, c.Evidence
		}
		for i, d := range ops.Drop {
			j, err := find(d.ID, fmt.Sprintf("commitments.drop[%d].id", i))
			if err != nil {
				return err
			}
			t := now
			commitments[j].State, commitments[j].EndedAt, commitments[j].Reason = "dropped", &t, d.Reason
		}
		open := 0
		for _, c := range commitments {
			if c.State == "open" {
				open++
			}
		}
		if open+len(ops.Open) > guard.MaxOpenCommitments {
			return capsule.Refuse(capsule.CodeTooManyOpenLoops, "commitments.open",
				"%d commitments are open; at most %d may be; close or drop one first", open, guard.MaxOpenCommitments)
		}
		for _, o := range ops.Open {
			*nextID++
			commitments = append(commitments, commitment{
				ID: fmt.Sprintf("c_%d", *nextID), Title: o.Title, State: "open", OpenedAt: now,
			})
		}
	}

	if cp.ResumeResidency {
		rz.stopped, rz.stopReason = false, ""
	}
	rz.commitments = commitments
	if cp.Focus != nil {
		f := *cp.Focus
		rz.focus = &f
	}
	if ws := cp.WorkingState; ws != nil {
		rz.hasWorking = true
		if ws.NextAction != nil {
			rz.working.NextAction = ptr(*ws.NextAction)
		}
		if ws.LastResult != nil {
			rz.working.LastResult = ptr(*ws.LastResult)
		}
		if ws.ResultRef.Set {
			rz.working.ResultRef = ws.ResultRef.Ptr()
		}
		if ws.WaitingFor.Set {
			rz.working.WaitingFor = ws.WaitingFor.Ptr()
		}
		rz.working.UpdatedAt = now
	}
	if d := cp.Decide; d != nil {
		rz.decisions = append(rz.decisions, decision{Decision: *d, At: now})
		if len(rz.decisions) > maxDecisions {
			rz.decisions = append([]decision(nil), rz.decisions[len(rz.decisions)-maxDecisions:]...)
		}
	}
	if ps := cp.PublicStatus; ps != nil {
		c := *ps
		c.Until = append(json.RawMessage(nil), ps.Until...)
		rz.publicStatus = &publicStatus{PublicStatus: &c, UpdatedAt: now}
	}
	rz.updatedAt = now
	return nil
}

func ptr(s string) *string { return &s }

// openCommitments lists the open commitments (copies).
func (rz *residency) openCommitments() []commitment {
	out := []commitment{}
	for _, c := range rz.commitments {
		if c.State == "open" {
			out = append(out, c)
		}
	}
	return out
}

func (rz *residency) common() map[string]any {
	var ws any
	if rz.hasWorking {
		w := rz.working
		ws = w
	}
	var ps any
	if rz.publicStatus != nil {
		ps = rz.publicStatus
	}
	decisions := append([]decision{}, rz.decisions...)
	return map[string]any{
		"focus":         rz.focus,
		"working_state": ws,
		"commitments":   rz.openCommitments(),
		"decisions":     decisions,
		"public_status": ps,
		"residency":     map[string]any{"stopped": rz.stopped, "stop_reason": rz.stopReason},
	}
}

// saved is the checkpoint answer: the saved state and the shapes of the
// commitment operations.
func (rz *residency) saved() map[string]any {
	v := rz.common()
	v["saved"] = true
	v["action_templates"] = map[string]any{
		"open_commitment":  map[string]any{"commitments": map[string]any{"open": []any{map[string]string{"title": "…"}}}},
		"close_commitment": map[string]any{"commitments": map[string]any{"close": []any{map[string]string{"id": "c_…", "evidence": "post:UUID"}}}},
		"drop_commitment":  map[string]any{"commitments": map[string]any{"drop": []any{map[string]string{"id": "c_…", "reason": "…"}}}},
	}
	return v
}

// resume is the answer of GET /v1/continuity.
func (rz *residency) resume(directions []json.RawMessage) map[string]any {
	v := rz.common()
	v["recent_publications"] = []any{}
	v["since_last_visit"] = map[string]any{}
	v["directions"] = directions
	v["degraded"] = []string{}
	return v
}
