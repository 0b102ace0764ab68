package capsule

// PlanStep is one step of the agent's own plan, as the agent stated it in
// its transcript (Claude Code's todo list or tasks, Codex's update_plan):
// the step's text and its status, nothing else.
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status"` // PlanPending, PlanInProgress or PlanCompleted
	// Lost names the loss (a work_lost id) that took the work of a
	// completed step: files changed in the turn it was completed in
	// vanished without a commit since. Set by the daemon at read time.
	Lost string `json:"lost,omitempty"`
}

// Plan step statuses: the three both agents use.
const (
	PlanPending    = "pending"
	PlanInProgress = "in_progress"
	PlanCompleted  = "completed"
)

// Plan limits. An agent's plan is a short list of short steps; these bound
// what a runaway or hostile transcript can put into the state.
const (
	MaxPlanSteps = 100 // steps beyond are left out
	MaxPlanStep  = 500 // characters of a step's text; longer is cut
)

// ValidPlanStatus reports whether s is one of the plan step statuses.
func ValidPlanStatus(s string) bool {
	return s == PlanPending || s == PlanInProgress || s == PlanCompleted
}

// CurrentPlanStep returns the step the agent is working on: the first one
// in progress. ok is false when no step is in progress.
func CurrentPlanStep(plan []PlanStep) (step PlanStep, ok bool) {
	for _, s := range plan {
		if s.Status == PlanInProgress {
			return s, true
		}
	}
	return PlanStep{}, false
}
