package transcript

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

// The agent's own plan: Claude Code's TodoWrite list and
// its newer task tools, Codex's update_plan. The shapes and their drift are
// in the plan fixtures' notes (testdata/plans/NOTE.md). Only each step's
// text and status are kept: never an explanation, a description, an
// activeForm, a prompt or other tool output.
//
// Two kinds of statement exist:
//   - a whole list, which replaces the plan: a TodoWrite call, an
//     update_plan call, a TaskList result, a task_reminder attachment;
//   - a change to one task, by id: TaskCreate (the id comes in its result),
//     TaskUpdate, TaskGet.
//
// Claude Code's calls count once their result says they succeeded (a
// TaskCreate with bad input is refused and creates nothing); Codex's
// update_plan counts when called, as Codex refuses only arguments that do
// not parse, and those are not read here either.
//
// Two records are deliberately not read. The top-level "todos" array of
// Claude Code's user lines restates the TodoWrite list the calls before it
// already set, and it stays [] in versions that plan with the task tools,
// so reading it would wipe their plan at every prompt. A subagent's plan
// (isSidechain lines) is not the agent's.

// Plan is the agent's whole plan as of a line, in the agent's order
// (tasks by their number).
type Plan struct {
	// Steps are the steps; empty means the agent's plan is now empty (a
	// task list Claude Code cleared, say).
	Steps []capsule.PlanStep
}

// RedactedStep is what a step's text is replaced by where the default
// redaction finds a credential in it.
const RedactedStep = "[REDACTED]"

// DefaultRedactStep redacts the credential shapes continuityd's own rules
// find. The daemon should pass its Guard's Redact (gitleaks' rules too) as
// Options.RedactStep.
func DefaultRedactStep(s string) string { return guard.RedactCredentialShapes(s, RedactedStep) }

// step is a plan step in the agent's own terms, before it is cleaned.
type step struct{ text, status string }

// planState is what the tracker knows of the plan.
type planState struct {
	// stated is set once a line stated a plan; out is the last plan
	// reported, cleaned, for telling a change from a repetition.
	stated bool
	out    []capsule.PlanStep

	// The plan is a list (list) or a set of tasks by id (tasks non-nil).
	list  []step
	tasks map[string]step

	// pending holds Claude Code plan calls whose result has not come yet.
	pending pendingCalls
	// clean caches cleaned step texts: the same steps are restated at
	// every update, and redaction with the full rule set is not free.
	clean map[string]string
}

// setList replaces the plan with a list.
func (t *Tracker) setList(u *Update, steps []step) {
	p := &t.plan
	p.list, p.tasks = steps, nil
	t.emitPlan(u)
}

// setTasks replaces the plan with a set of tasks.
func (t *Tracker) setTasks(u *Update, tasks map[string]step) {
	p := &t.plan
	p.list, p.tasks = nil, tasks
	t.emitPlan(u)
}

// changeTask applies fn to the plan's tasks and reports the plan if it
// changed. A plan that was a list becomes a set of tasks only if fn added
// one.
func (t *Tracker) changeTask(u *Update, fn func(tasks map[string]step)) {
	p := &t.plan
	tasks := p.tasks
	if tasks == nil {
		tasks = map[string]step{}
	}
	fn(tasks)
	if p.tasks == nil && len(tasks) == 0 {
		return // nothing to change: a list stays a list
	}
	p.tasks, p.list = tasks, nil
	if len(p.tasks) > maxTasks {
		// A runaway transcript: keep the lowest numbers, as the plan does.
		for _, id := range sortedTaskIDs(p.tasks)[maxTasks:] {
			delete(p.tasks, id)
		}
	}
	t.emitPlan(u)
}

// maxTasks bounds the tasks remembered; a few more than a plan can show,
// so deleting one lets the next appear.
const maxTasks = 4 * capsule.MaxPlanSteps

// emitPlan reports the plan in u if it differs from the last reported.
func (t *Tracker) emitPlan(u *Update) {
	p := &t.plan
	var raw []step
	if p.tasks != nil {
		for _, id := range sortedTaskIDs(p.tasks) {
			raw = append(raw, p.tasks[id])
		}
	} else {
		raw = p.list
	}
	steps := make([]capsule.PlanStep, 0, min(len(raw), capsule.MaxPlanSteps))
	for _, s := range raw {
		if len(steps) == capsule.MaxPlanSteps {
			break
		}
		if !capsule.ValidPlanStatus(s.status) {
			continue // not a status both agents know: not a step we can show
		}
		text := t.cleanStep(s.text)
		if text == "" {
			continue
		}
		steps = append(steps, capsule.PlanStep{Step: text, Status: s.status})
	}
	if p.stated && slices.Equal(steps, p.out) {
		return
	}
	p.stated, p.out = true, steps
	u.Plan = &Plan{Steps: slices.Clone(steps)}
}

// statePlan returns the plan for State, nil until one was stated.
func (p *planState) statePlan() *Plan {
	if !p.stated {
		return nil
	}
	return &Plan{Steps: slices.Clone(p.out)}
}

// maxCleanCache bounds the cache of cleaned texts.
const maxCleanCache = 512

// cleanStep makes a step's text one line of at most capsule.MaxPlanStep
// characters with credentials redacted.
func (t *Tracker) cleanStep(s string) string {
	p := &t.plan
	if c, ok := p.clean[s]; ok {
		return c
	}
	c := cleanStepText(s, t.redactStep)
	if p.clean == nil || len(p.clean) >= maxCleanCache {
		p.clean = make(map[string]string)
	}
	p.clean[s] = c
	return c
}

func cleanStepText(s string, redact func(string) string) string {
	// Bound the work first: a step is a line, not a document.
	if len(s) > 4*capsule.MaxPlanStep*utf8.UTFMax {
		s = s[:4*capsule.MaxPlanStep*utf8.UTFMax]
	}
	s = strings.ToValidUTF8(s, "")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
	}), " ")
	// Redact before cutting: a cut could hide a credential from the rules
	// and leave its first half in.
	s = redact(s)
	if utf8.RuneCountInString(s) > capsule.MaxPlanStep {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:capsule.MaxPlanStep-1])) + "…"
	}
	return s
}

// validTaskID accepts the task ids Claude Code uses (numeric strings) and
// other short plain ids a later version might; anything else (a
// placeholder, a sentence) is no id.
func validTaskID(s string) bool { return len(s) <= 64 && validSessionID(s) }

// sortedTaskIDs orders task ids by number, ids that are not numbers after
// them by name: the order the agent created its tasks in.
func sortedTaskIDs(tasks map[string]step) []string {
	ids := make([]string, 0, len(tasks))
	for id := range tasks {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, aerr := strconv.ParseUint(ids[i], 10, 64)
		b, berr := strconv.ParseUint(ids[j], 10, 64)
		switch {
		case aerr == nil && berr == nil && a != b:
			return a < b
		case (aerr == nil) != (berr == nil):
			return aerr == nil
		}
		return ids[i] < ids[j]
	})
	return ids
}

// pendingCall is a Claude Code plan call, or a tool call, waiting for its
// result.
type pendingCall struct {
	name    string
	todos   []step // TodoWrite
	subject string // TaskCreate, TaskUpdate ("" when not set)
	taskID  string // TaskUpdate
	status  string // TaskUpdate ("" when not set)

	// An edit or shell tool call (tools.go): the paths it names, those
	// refused, and when it was called.
	paths, refused []string
	at             time.Time
}

// pendingCalls remembers the last calls by tool_use id, in bounded memory:
// a result comes a few lines after its call.
type pendingCalls struct {
	ring []string
	next int
	m    map[string]pendingCall
}

const maxPending = 64

func (pc *pendingCalls) add(id string, c pendingCall) {
	if pc.m == nil {
		pc.ring, pc.m = make([]string, maxPending), make(map[string]pendingCall)
	}
	if old := pc.ring[pc.next]; old != "" {
		delete(pc.m, old)
	}
	pc.ring[pc.next] = id
	pc.m[id] = c
	pc.next = (pc.next + 1) % len(pc.ring)
}

func (pc *pendingCalls) take(id string) (pendingCall, bool) {
	c, ok := pc.m[id]
	if ok {
		delete(pc.m, id)
	}
	return c, ok
}

func (pc *pendingCalls) empty() bool { return len(pc.m) == 0 }

// arr is a JSON array whose elements are decoded as obj[T]: an element of
// another shape is kept with ok false. Anything but an array leaves ok
// false.
type arr[T any] struct {
	v  []obj[T]
	ok bool
}

func (a *arr[T]) UnmarshalJSON(b []byte) error {
	*a = arr[T]{}
	if len(b) > 0 && b[0] == '[' && json.Unmarshal(b, &a.v) == nil {
		a.ok = true
	}
	return nil
}

// taskID is a task id: a string of the accepted shape or a whole number
// (should a version write it as one); anything else leaves it unset.
type taskID struct {
	v  string
	ok bool
}

func (id *taskID) UnmarshalJSON(b []byte) error {
	*id = taskID{}
	var s string
	switch {
	case len(b) > 0 && b[0] == '"':
		if json.Unmarshal(b, &s) != nil {
			return nil
		}
	default:
		n, err := strconv.ParseUint(string(b), 10, 64)
		if err != nil {
			return nil
		}
		s = strconv.FormatUint(n, 10)
	}
	if validTaskID(s) {
		id.v, id.ok = s, true
	}
	return nil
}
