package transcript

import (
	"bytes"
	"encoding/json"
	goflag "flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
)

var update = goflag.Bool("update", false, "rewrite the plan fixtures' golden files")

// planFixtures lists testdata/plans/*.jsonl with the format of each.
func planFixtures(t testing.TB) map[string]Format {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "plans", "*.jsonl"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no plan fixtures: %v", err)
	}
	out := map[string]Format{}
	for _, n := range names {
		f := ClaudeCode
		if strings.HasPrefix(filepath.Base(n), "codex-") {
			f = Codex
		}
		out[filepath.Join("plans", filepath.Base(n))] = f
	}
	return out
}

// planRun is what feeding a file to a Tracker says about the plan.
type planRun struct {
	changed []int // 1-based numbers of the lines that changed the plan
	plans   []*Plan
	state   State
}

func feedPlan(t testing.TB, f Format, o Options, lines [][]byte) planRun {
	t.Helper()
	tr := NewTrackerWith(f, o)
	var r planRun
	for i, l := range lines {
		u, err := tr.Line(l)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if u.Plan != nil {
			r.changed = append(r.changed, i+1)
			r.plans = append(r.plans, u.Plan)
		}
	}
	r.state = tr.State()
	return r
}

// TestPlanFixtures: every real sample yields, as its final plan, the plan
// its last plan statement states (the reviewed golden file), and only lines
// that are plan statements change the plan.
func TestPlanFixtures(t *testing.T) {
	for name, f := range planFixtures(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			lines := fixtureLines(t, name)
			r := feedPlan(t, f, Options{}, lines)

			var final []capsule.PlanStep
			if r.state.Plan != nil {
				final = r.state.Plan.Steps
				if final == nil {
					final = []capsule.PlanStep{}
				}
			}
			got, _ := json.MarshalIndent(final, "", "  ")
			got = append(got, '\n')
			golden := filepath.Join("testdata", strings.TrimSuffix(name, ".jsonl")+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update once, then review the file)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("final plan:\n%s\nwant (%s):\n%s", got, golden, want)
			}
			if n := len(r.plans); n > 0 && !slices.Equal(r.plans[n-1].Steps, r.state.Plan.Steps) {
				t.Fatalf("the state's plan is not the last reported one")
			}

			statements := planStatementLines(t, f, lines)
			for _, n := range r.changed {
				if !statements[n] {
					t.Errorf("line %d changed the plan but states none", n)
				}
			}
			checkPlanText(t, lines, r.plans)
		})
	}
}

// planStatementLines finds, independently of the parser, the lines that
// state a plan: a Claude Code plan tool's result or a task_reminder, a
// Codex update_plan call.
func planStatementLines(t testing.TB, f Format, lines [][]byte) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	calls := map[string]bool{}
	for i, l := range lines {
		var e map[string]any
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if f == Codex {
			p, _ := e["payload"].(map[string]any)
			if e["type"] == "response_item" && p["type"] == "function_call" && p["name"] == "update_plan" {
				out[i+1] = true
			}
			continue
		}
		if a, _ := e["attachment"].(map[string]any); e["type"] == "attachment" && a["type"] == "task_reminder" {
			out[i+1] = true
		}
		m, _ := e["message"].(map[string]any)
		blocks, _ := m["content"].([]any)
		for _, b := range blocks {
			b, _ := b.(map[string]any)
			switch b["type"] {
			case "tool_use":
				switch b["name"] {
				case "TodoWrite", "TaskCreate", "TaskUpdate", "TaskList", "TaskGet":
					calls[b["id"].(string)] = true
				}
			case "tool_result":
				if id, _ := b["tool_use_id"].(string); calls[id] {
					out[i+1] = true
				}
			}
		}
	}
	return out
}

// checkPlanText: every step reported is plan text the file holds (a todo's
// content, a task's subject, a Codex step), never other text of the line
// (activeForm, description, explanation, a prompt, a tool's output).
func checkPlanText(t testing.TB, lines [][]byte, plans []*Plan) {
	t.Helper()
	texts := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "content" || k == "subject" || k == "step") {
					texts[s] = true
				}
				if s, ok := x.(string); ok && k == "arguments" {
					var args any
					if json.Unmarshal([]byte(s), &args) == nil {
						walk(args)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, l := range lines {
		var v any
		json.Unmarshal(l, &v)
		walk(v)
	}
	for _, p := range plans {
		for _, s := range p.Steps {
			if !texts[s.Step] {
				t.Errorf("step %q is not plan text of the file", s.Step)
			}
			if !capsule.ValidPlanStatus(s.Status) {
				t.Errorf("step %q has status %q", s.Step, s.Status)
			}
		}
	}
}

// TestPlanFixturesLastCall checks the golden files of the list tools
// without the parser: the final plan is the last TodoWrite's todos or the
// last update_plan's plan, read here with encoding/json.
func TestPlanFixturesLastCall(t *testing.T) {
	for name, f := range planFixtures(t) {
		base := filepath.Base(name)
		if !strings.HasPrefix(base, "claude-todowrite-") && !strings.HasPrefix(base, "codex-") {
			continue
		}
		var last []capsule.PlanStep
		for _, l := range fixtureLines(t, name) {
			var e struct {
				Message struct {
					Content []struct {
						Name  string `json:"name"`
						Input struct {
							Todos []struct{ Content, Status string } `json:"todos"`
						} `json:"input"`
					} `json:"content"`
				} `json:"message"`
				Payload struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"payload"`
			}
			json.Unmarshal(l, &e)
			if f == Codex && e.Payload.Name == "update_plan" {
				var a struct{ Plan []capsule.PlanStep }
				if err := json.Unmarshal([]byte(e.Payload.Arguments), &a); err != nil {
					t.Fatal(err)
				}
				last = a.Plan
			}
			for _, b := range e.Message.Content {
				if b.Name == "TodoWrite" {
					last = nil
					for _, it := range b.Input.Todos {
						last = append(last, capsule.PlanStep{Step: it.Content, Status: it.Status})
					}
				}
			}
		}
		if last == nil {
			t.Fatalf("%s: no plan call", name)
		}
		r := feedPlan(t, f, Options{}, fixtureLines(t, name))
		if r.state.Plan == nil || !slices.Equal(r.state.Plan.Steps, last) {
			t.Errorf("%s: final plan %+v, last call states %+v", name, r.state.Plan, last)
		}
	}
}

// TestPlanOtherFixtures: the context fixtures, which hold prompts, tool
// calls of every kind, "todos":[] on user lines, compactions and subagent
// lines, change the plan only where they state one (the drift catalog's
// task_reminder attachments), and the Codex rollouts never.
func TestPlanOtherFixtures(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if len(names) < 10 {
		t.Fatalf("fixtures missing: %v", names)
	}
	for _, n := range names {
		name := filepath.Base(n)
		f := ClaudeCode
		if strings.HasPrefix(name, "rollout-") {
			f = Codex
		}
		lines := fixtureLines(t, name)
		r := feedPlan(t, f, Options{}, lines)
		statements := planStatementLines(t, f, lines)
		for _, l := range r.changed {
			if !statements[l] {
				t.Errorf("%s: line %d changed the plan but states none", name, l)
			}
		}
		if strings.Contains(name, "catalog-v2.1") {
			if len(r.changed) == 0 {
				t.Errorf("%s: the task_reminder lines were not read", name)
			}
		} else if len(r.changed) != 0 {
			t.Errorf("%s: plan changed at lines %v", name, r.changed)
		}
		checkPlanText(t, lines, r.plans)
	}
}

func planOf(t *testing.T, f Format, o Options, lines ...string) planRun {
	t.Helper()
	var ls [][]byte
	for _, l := range lines {
		ls = append(ls, []byte(l))
	}
	return feedPlan(t, f, o, ls)
}

func steps(kv ...string) []capsule.PlanStep {
	out := []capsule.PlanStep{}
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, capsule.PlanStep{Step: kv[i], Status: kv[i+1]})
	}
	return out
}

func todoWrite(id string, todos string) string {
	return `{"type":"assistant","isSidechain":false,"message":{"content":[{"type":"tool_use","id":"` + id + `","name":"TodoWrite","input":{"todos":` + todos + `}}]}}`
}

func toolResult(id string, isError bool, toolUseResult string) string {
	e := "false"
	if isError {
		e = "true"
	}
	l := `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"` + id + `","is_error":` + e + `,"content":"ok"}]}`
	if toolUseResult != "" {
		l += `,"toolUseResult":` + toolUseResult
	}
	return l + `}`
}

func taskCall(id, name, input string) string {
	return `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":` + input + `}]}}`
}

func TestPlanClaudeRules(t *testing.T) {
	two := `[{"content":"a","status":"completed","activeForm":"doing a"},{"content":"b","status":"in_progress"}]`
	t.Run("a call counts on its successful result", func(t *testing.T) {
		r := planOf(t, ClaudeCode, Options{}, todoWrite("t1", two), toolResult("t1", false, ""))
		if !slices.Equal(r.changed, []int{2}) || !slices.Equal(r.state.Plan.Steps, steps("a", "completed", "b", "in_progress")) {
			t.Fatalf("%v %+v", r.changed, r.state.Plan)
		}
	})
	t.Run("a refused call, a result of another call, a sidechain", func(t *testing.T) {
		side := strings.Replace(todoWrite("t3", two), `"isSidechain":false`, `"isSidechain":true`, 1)
		r := planOf(t, ClaudeCode, Options{},
			todoWrite("t1", two), toolResult("t1", true, ""),
			toolResult("t2", false, ""),
			side, toolResult("t3", false, ""),
			`{"type":"user","todos":[{"content":"from a prompt line","status":"pending"}],"message":{"content":"hi"}}`,
			`{"type":"user","todos":[],"message":{"content":"hi"}}`)
		if len(r.changed) != 0 || r.state.Plan != nil {
			t.Fatalf("%v %+v", r.changed, r.state.Plan)
		}
	})
	t.Run("a repeated statement is no change; an emptied list is", func(t *testing.T) {
		r := planOf(t, ClaudeCode, Options{},
			todoWrite("t1", two), toolResult("t1", false, ""),
			todoWrite("t2", two), toolResult("t2", false, ""),
			todoWrite("t3", `[]`), toolResult("t3", false, ""))
		if !slices.Equal(r.changed, []int{2, 6}) || r.state.Plan == nil || len(r.state.Plan.Steps) != 0 {
			t.Fatalf("%v %+v", r.changed, r.state.Plan)
		}
	})
	t.Run("task tools by id", func(t *testing.T) {
		r := planOf(t, ClaudeCode, Options{},
			taskCall("c1", "TaskCreate", `{"subject":"first","description":"not plan text"}`),
			taskCall("c2", "TaskCreate", `{"subject":"second"}`),
			taskCall("c10", "TaskCreate", `{"subject":"tenth"}`),
			toolResult("c10", false, `{"task":{"id":"10","subject":"tenth"}}`),
			toolResult("c2", false, `{"task":{"id":"2","subject":"second"}}`),
			// Its id from the text only.
			`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"Task #1 created successfully: first"}]}]}}`,
			taskCall("u1", "TaskUpdate", `{"taskId":"1","status":"in_progress"}`),
			toolResult("u1", false, `{"success":true,"taskId":"1","updatedFields":["status"]}`),
			taskCall("u2", "TaskUpdate", `{"taskId":"2","status":"completed"}`),
			toolResult("u2", false, `{"success":false,"taskId":"2","updatedFields":[],"error":"Task not found"}`),
			taskCall("u3", "TaskUpdate", `{"taskId":"10","status":"deleted"}`),
			toolResult("u3", false, `{"success":true}`),
			taskCall("u4", "TaskUpdate", `{"taskId":"99","status":"completed"}`),
			toolResult("u4", false, `{"success":true}`))
		if !slices.Equal(r.changed, []int{4, 5, 6, 8, 12}) {
			t.Fatalf("changed at %v", r.changed)
		}
		if !slices.Equal(r.state.Plan.Steps, steps("first", "in_progress", "second", "pending")) {
			t.Fatalf("%+v", r.state.Plan)
		}
	})
	t.Run("a task_reminder and a TaskList replace the tasks; TaskGet updates one", func(t *testing.T) {
		r := planOf(t, ClaudeCode, Options{},
			todoWrite("t1", two), toolResult("t1", false, ""),
			`{"type":"attachment","attachment":{"type":"task_reminder","content":[{"id":"2","subject":"b","status":"pending"},{"id":"1","subject":"a","status":"completed","description":"x"},{"id":"[trimmed]","subject":"bad id","status":"pending"},{"id":"3","subject":"odd status","status":"[trimmed]"}],"itemCount":4}}`,
			taskCall("g", "TaskGet", `{"taskId":"2"}`),
			toolResult("g", false, `{"task":{"id":"2","subject":"b","description":"d","status":"in_progress","blocks":[],"blockedBy":[]}}`),
			taskCall("l", "TaskList", `{}`),
			toolResult("l", false, `{"tasks":[]}`))
		if !slices.Equal(r.changed, []int{2, 3, 5, 7}) {
			t.Fatalf("changed at %v", r.changed)
		}
		if !slices.Equal(r.plans[1].Steps, steps("a", "completed", "b", "pending")) ||
			!slices.Equal(r.plans[2].Steps, steps("a", "completed", "b", "in_progress")) ||
			len(r.state.Plan.Steps) != 0 {
			t.Fatalf("%+v", r.plans)
		}
	})
	t.Run("a TaskUpdate of an unknown task leaves a todo list alone", func(t *testing.T) {
		r := planOf(t, ClaudeCode, Options{},
			todoWrite("t1", two), toolResult("t1", false, ""),
			taskCall("u", "TaskUpdate", `{"taskId":"7","status":"completed"}`), toolResult("u", false, `{"success":true}`))
		if !slices.Equal(r.changed, []int{2}) {
			t.Fatalf("changed at %v", r.changed)
		}
	})
	t.Run("a malformed line changes nothing", func(t *testing.T) {
		tr := NewTracker(ClaudeCode)
		tr.Line([]byte(todoWrite("t1", two)))
		if _, err := tr.Line([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1"`)); err == nil {
			t.Fatal("no error")
		}
		if tr.State().Plan != nil {
			t.Fatal("plan from a malformed line")
		}
		if u, _ := tr.Line([]byte(toolResult("t1", false, ""))); u.Plan == nil {
			t.Fatal("the call was lost")
		}
	})
}

func codexPlanCall(args string) string {
	b, _ := json.Marshal(args)
	return `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call","name":"update_plan","arguments":` + string(b) + `,"call_id":"call_1"}}`
}

func TestPlanCodexRules(t *testing.T) {
	meta := `{"type":"session_meta","payload":{"id":"019e-1","cwd":"/repo"}}`
	r := planOf(t, Codex, Options{},
		meta,
		codexPlanCall(`{"explanation":"prose, not plan","plan":[{"step":"one","status":"in_progress"},{"step":"two","status":"pending"}]}`),
		`{"type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"Plan updated"}}`,
		meta, // repeated by each new turn: neither a new session nor a new plan
		codexPlanCall(`{"plan":[{"step":"one","status":"completed"},{"step":"two","status":"in_progress"}`), // does not parse
		`{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"plan\":[{\"step\":\"x\",\"status\":\"pending\"}]}"}}`,
		`{"type":"response_item","payload":{"type":"function_call","name":"update_plan","arguments":{"plan":[{"step":"one","status":"completed"},{"step":"two","status":"cancelled"}]}}}`,
	)
	if !slices.Equal(r.changed, []int{2, 7}) {
		t.Fatalf("changed at %v", r.changed)
	}
	if !slices.Equal(r.plans[0].Steps, steps("one", "in_progress", "two", "pending")) ||
		!slices.Equal(r.state.Plan.Steps, steps("one", "completed")) || r.state.SessionID != "019e-1" {
		t.Fatalf("%+v %q", r.plans, r.state.SessionID)
	}
}

// TestPlanStepText: a step is one line of bounded length, and a step with
// a credential in it is redacted alone, not the whole plan.
func TestPlanStepText(t *testing.T) {
	g, err := guard.New(guard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", capsule.MaxPlanStep+50)
	for _, c := range []struct {
		name, secret string
		o            Options
	}{
		// continuityd's own credential rules, with no Guard.
		{"default", "sk-" + pseudoRandom(48), Options{}},
		// The daemon's Guard: gitleaks' rules too.
		{"guard", "ghp_" + pseudoRandom(36), Options{RedactStep: g.Redact}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := `{"plan":[{"step":"rotate the token ` + c.secret + ` in CI","status":"pending"},{"step":"line one\nline\ttwo\u0000","status":"in_progress"},{"step":"` + long + `","status":"pending"},{"step":"  ","status":"pending"}]}`
			r := planOf(t, Codex, c.o, codexPlanCall(plan))
			got := r.state.Plan.Steps
			if len(got) != 3 {
				t.Fatalf("%+v", got)
			}
			if strings.Contains(got[0].Step, c.secret[5:20]) || !strings.Contains(got[0].Step, "[REDACTED]") {
				t.Errorf("secret step: %q", got[0].Step)
			}
			if got[1].Step != "line one line two" {
				t.Errorf("multi-line step: %q", got[1].Step)
			}
			if n := len([]rune(got[2].Step)); n != capsule.MaxPlanStep || !strings.HasSuffix(got[2].Step, "…") {
				t.Errorf("long step: %d characters", n)
			}
		})
	}
	// Many steps: the plan is bounded.
	var b strings.Builder
	b.WriteString(`{"plan":[`)
	for i := range capsule.MaxPlanSteps + 20 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"step":"s","status":"pending"}`)
	}
	b.WriteString(`]}`)
	if r := planOf(t, Codex, Options{}, codexPlanCall(b.String())); len(r.state.Plan.Steps) != capsule.MaxPlanSteps {
		t.Fatalf("%d steps", len(r.state.Plan.Steps))
	}
}

// pseudoRandom returns n letters and digits that look random (a fixed
// sequence, so the test is the same every run).
func pseudoRandom(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	x := uint64(0x9E3779B97F4A7C15)
	b := make([]byte, n)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = chars[x%uint64(len(chars))]
	}
	return string(b)
}
