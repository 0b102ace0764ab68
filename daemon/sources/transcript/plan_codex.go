package transcript

import (
	"bytes"
	"encoding/json"
)

// Codex's plan record (testdata/plans/NOTE.md): a response_item
// function_call named update_plan whose arguments, a JSON string, hold
// {explanation?, plan:[{step,status}]}: the whole plan. The explanation is
// the model's prose and is not read. Its output ("Plan updated") says
// nothing more.

type codexPlanLine struct {
	Type    str                   `json:"type"`
	Payload obj[codexPlanPayload] `json:"payload"`
}

type codexPlanPayload struct {
	Type      str             `json:"type"`
	Name      str             `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type codexPlanArgs struct {
	Plan arr[codexPlanItem] `json:"plan"`
}

type codexPlanItem struct {
	Step   str `json:"step"`
	Status str `json:"status"`
}

var codexPlanWord = []byte("update_plan")

// codexPlan reads the plan from one well-formed Codex line.
func (t *Tracker) codexPlan(u *Update, line []byte) {
	if !bytes.Contains(line, codexPlanWord) {
		return
	}
	var l codexPlanLine
	if decodeLine(line, &l) != nil || l.Type.v != "response_item" || !l.Payload.ok {
		return
	}
	p := &l.Payload.v
	if p.Type.v != "function_call" || p.Name.v != "update_plan" {
		return
	}
	args := p.Arguments
	if len(args) > 0 && args[0] == '"' {
		// The arguments as the model wrote them: JSON in a string.
		var s string
		if json.Unmarshal(args, &s) != nil {
			return
		}
		args = []byte(s)
	}
	var a codexPlanArgs
	if decodeLine(bytes.TrimSpace(args), &a) != nil || !a.Plan.ok {
		return // Codex refuses arguments it cannot parse: no plan change
	}
	steps := make([]step, 0, len(a.Plan.v))
	for _, it := range a.Plan.v {
		if it.ok && it.v.Step.ok {
			steps = append(steps, step{text: it.v.Step.v, status: it.v.Status.v})
		}
	}
	t.setList(u, steps)
}
