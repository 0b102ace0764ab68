package capsule

import (
	"slices"
	"time"
)

// Seal builds the capsule a seal stores from the agent's state st: focus → goal, next_action
// → next, last_result → done, waiting_for → blockers; do_not and refuted,
// which the checkpoint model does not carry, come from the agent's latest
// capsule; receipts are the residency's, then the draft's, newest 20.
func Seal(st Resume, draft *CapsuleRecord, now time.Time) *Capsule {
	c := &Capsule{Version: "1", Goal: st.Focus, WrittenBy: st.Agent, WrittenAt: now.Format(time.RFC3339)}
	if ws := st.WorkingState; ws != nil {
		c.Next, c.Done = ws.NextAction, ws.LastResult
		if ws.WaitingFor != nil {
			c.Blockers = *ws.WaitingFor
		}
	}
	if c.Next == "" {
		// The agent's own plan, when it wrote no next action: the step in
		// progress.
		if cur, ok := CurrentPlanStep(st.Plan); ok {
			c.Next = cur.Step
		}
	}
	var receipts []string
	if draft != nil {
		dc := draft.Capsule
		c.DoNot, c.Refuted, c.HandoffTo, c.TTLDays = dc.DoNot, dc.Refuted, dc.HandoffTo, dc.TTLDays
		if c.Goal == "" {
			c.Goal = dc.Goal
		}
		if c.Next == "" {
			c.Next = dc.Next
		}
		if c.Done == "" {
			c.Done = dc.Done
		}
		if c.Blockers == "" {
			c.Blockers = dc.Blockers
		}
		receipts = append(receipts, dc.Receipts...)
	}
	for _, rc := range st.Receipts {
		if !slices.Contains(receipts, rc) {
			receipts = append(receipts, rc)
		}
	}
	if len(receipts) > CapsuleReceipts {
		receipts = receipts[len(receipts)-CapsuleReceipts:]
	}
	c.Receipts = receipts
	return c
}
