package agent

import (
	"slices"

	"github.com/continuityd/continuityd/capsule"
)

// markLostDone marks what r says was done whose work was lost since (the
// last result, the completed plan steps) with the loss, so that resume
// never claims work that exists nowhere. The residency's own values are
// not touched: r gets copies.
func (a *Agent) markLostDone(r *capsule.Resume) {
	if len(r.WorkLost) == 0 {
		return
	}
	if ws := r.WorkingState; ws != nil && ws.LastResult != "" {
		if id := a.capture.LostDone(ws.UpdatedAt); id != "" {
			c := *ws
			c.Lost = id
			r.WorkingState = &c
		}
	}
	if r.PlanUpdatedAt == nil || !slices.ContainsFunc(r.Plan, func(s capsule.PlanStep) bool { return s.Status == capsule.PlanCompleted }) {
		return
	}
	if id := a.capture.LostDone(*r.PlanUpdatedAt); id != "" {
		plan := slices.Clone(r.Plan)
		for i := range plan {
			if plan[i].Status == capsule.PlanCompleted {
				plan[i].Lost = id
			}
		}
		r.Plan = plan
	}
}
