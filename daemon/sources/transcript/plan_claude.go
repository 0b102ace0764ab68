package transcript

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/capsule"
)

// Claude Code's plan records (testdata/plans/NOTE.md):
//
//   - TodoWrite {todos:[{content,status,activeForm?|id?,priority?}]}: the
//     whole list; result "Todos have been modified successfully…".
//   - TaskCreate {subject,description,activeForm?}: result
//     toolUseResult {task:{id:"N",subject}}, text "Task #N created
//     successfully: …"; a new task is pending.
//   - TaskUpdate {taskId,status?,subject?,…}: result toolUseResult
//     {success,taskId,updatedFields,statusChange?}; status "deleted"
//     removes the task.
//   - TaskList {}: result toolUseResult {tasks:[{id,subject,status,…}]},
//     the whole list (another session may have changed it).
//   - TaskGet {taskId}: result toolUseResult {task:{id,subject,status,…}}.
//   - attachment {type:"task_reminder",content:[{id,subject,status,…}]}:
//     the whole list, written by Claude Code itself.

// Claude Code's plan tool names.
const (
	toolTodoWrite  = "TodoWrite"
	toolTaskCreate = "TaskCreate"
	toolTaskUpdate = "TaskUpdate"
	toolTaskList   = "TaskList"
	toolTaskGet    = "TaskGet"
)

// claudePlanWords are the strings a line must contain to be worth decoding
// for the plan; most lines (and all the big ones) contain none.
var claudePlanWords = [][]byte{
	[]byte(toolTodoWrite), []byte(toolTaskCreate), []byte(toolTaskUpdate),
	[]byte(toolTaskList), []byte(toolTaskGet), []byte("task_reminder"),
}

type claudePlanEntry struct {
	Type          str                      `json:"type"`
	IsSidechain   flag                     `json:"isSidechain"`
	Message       obj[claudePlanMessage]   `json:"message"`
	ToolUseResult obj[claudeToolUseResult] `json:"toolUseResult"`
	Attachment    obj[claudeAttachment]    `json:"attachment"`
}

type claudePlanMessage struct {
	Content arr[claudeBlock] `json:"content"`
}

// claudeBlock is a content block: a tool_use (id, name, input) or a
// tool_result (tool_use_id, is_error, content).
type claudeBlock struct {
	Type      str                  `json:"type"`
	ID        str                  `json:"id"`
	Name      str                  `json:"name"`
	Input     obj[claudeToolInput] `json:"input"`
	ToolUseID str                  `json:"tool_use_id"`
	IsError   flag                 `json:"is_error"`
	Content   json.RawMessage      `json:"content"`
}

type claudeToolInput struct {
	Todos   arr[claudeTodo] `json:"todos"`
	Subject str             `json:"subject"`
	TaskID  taskID          `json:"taskId"`
	Status  str             `json:"status"`
}

type claudeTodo struct {
	Content str `json:"content"`
	Status  str `json:"status"`
}

type claudeToolUseResult struct {
	Task    obj[claudeTask] `json:"task"`
	Tasks   arr[claudeTask] `json:"tasks"`
	Success flag            `json:"success"`
}

type claudeTask struct {
	ID      taskID `json:"id"`
	Subject str    `json:"subject"`
	Status  str    `json:"status"`
}

type claudeAttachment struct {
	Type    str             `json:"type"`
	Content arr[claudeTask] `json:"content"`
}

// claudePlan reads the plan records of one well-formed Claude Code line.
func (t *Tracker) claudePlan(u *Update, line []byte) {
	if !t.plan.pending.empty() && bytes.Contains(line, []byte("tool_use_id")) {
		// A result of a call made earlier.
	} else if !containsAny(line, claudePlanWords) {
		return
	}
	var e claudePlanEntry
	if decodeLine(line, &e) != nil || e.IsSidechain.v || e.IsSidechain.bad {
		return
	}
	if e.Type.v == "attachment" {
		if a := e.Attachment; a.ok && a.v.Type.v == "task_reminder" && a.v.Content.ok {
			t.setTasks(u, taskSnapshot(a.v.Content))
		}
		return
	}
	if !e.Message.ok || !e.Message.v.Content.ok {
		return
	}
	blocks := e.Message.v.Content.v
	results := 0
	for _, b := range blocks {
		if b.ok && b.v.Type.v == "tool_result" {
			results++
		}
	}
	for _, b := range blocks {
		if !b.ok {
			continue
		}
		switch b.v.Type.v {
		case "tool_use":
			if e.Type.v == "assistant" {
				t.claudeCall(&b.v)
			}
		case "tool_result":
			// toolUseResult belongs to the line's only result; with
			// several it cannot be told whose it is.
			var r *claudeToolUseResult
			if results == 1 && e.ToolUseResult.ok {
				r = &e.ToolUseResult.v
			}
			t.claudeResult(u, &b.v, r)
		}
	}
}

// claudeCall remembers a plan call until its result.
func (t *Tracker) claudeCall(b *claudeBlock) {
	if !b.ID.ok || !validSessionID(b.ID.v) || !b.Input.ok {
		return
	}
	in := &b.Input.v
	c := pendingCall{name: b.Name.v}
	switch c.name {
	case toolTodoWrite:
		if !in.Todos.ok {
			return // Claude Code refuses it too
		}
		for _, it := range in.Todos.v {
			if it.ok && it.v.Content.ok {
				c.todos = append(c.todos, step{text: it.v.Content.v, status: it.v.Status.v})
			}
		}
	case toolTaskCreate:
		c.subject = in.Subject.v
	case toolTaskUpdate:
		if !in.TaskID.ok {
			return
		}
		c.taskID, c.subject, c.status = in.TaskID.v, in.Subject.v, in.Status.v
	case toolTaskList, toolTaskGet:
	default:
		return
	}
	t.plan.pending.add(b.ID.v, c)
}

// claudeResult applies a plan call once its result says it succeeded. r is
// the line's toolUseResult, nil when absent or not this result's.
func (t *Tracker) claudeResult(u *Update, b *claudeBlock, r *claudeToolUseResult) {
	if !b.ToolUseID.ok {
		return
	}
	c, ok := t.plan.pending.take(b.ToolUseID.v)
	if !ok || b.IsError.v || b.IsError.bad {
		return
	}
	switch c.name {
	case toolTodoWrite:
		t.setList(u, c.todos)
	case toolTaskCreate:
		var id, subject string
		if r != nil && r.Task.ok && r.Task.v.ID.ok {
			id, subject = r.Task.v.ID.v, r.Task.v.Subject.v
		} else {
			id = createdTaskID(b.Content)
		}
		if c.subject != "" {
			subject = c.subject // the agent's own words
		}
		if id == "" || subject == "" {
			return
		}
		t.changeTask(u, func(tasks map[string]step) {
			tasks[id] = step{text: subject, status: capsule.PlanPending}
		})
	case toolTaskUpdate:
		if r != nil && r.Success.set && !r.Success.v {
			return // {"success":false,"error":"Task not found"}
		}
		t.changeTask(u, func(tasks map[string]step) {
			s, known := tasks[c.taskID]
			if c.status == "deleted" {
				delete(tasks, c.taskID)
				return
			}
			if c.subject != "" {
				s.text = c.subject
			}
			if capsule.ValidPlanStatus(c.status) {
				s.status = c.status
			}
			if known || s.text != "" && s.status != "" {
				tasks[c.taskID] = s
			}
		})
	case toolTaskList:
		if r != nil && r.Tasks.ok {
			t.setTasks(u, taskSnapshot(r.Tasks))
		}
	case toolTaskGet:
		if r == nil || !r.Task.ok {
			return
		}
		task := r.Task.v
		if task.ID.ok && task.Subject.v != "" && capsule.ValidPlanStatus(task.Status.v) {
			t.changeTask(u, func(tasks map[string]step) {
				tasks[task.ID.v] = step{text: task.Subject.v, status: task.Status.v}
			})
		}
	}
}

// taskSnapshot makes the set of tasks a whole list states.
func taskSnapshot(list arr[claudeTask]) map[string]step {
	tasks := make(map[string]step, len(list.v))
	for _, it := range list.v {
		if it.ok && it.v.ID.ok && len(tasks) < maxTasks {
			tasks[it.v.ID.v] = step{text: it.v.Subject.v, status: it.v.Status.v}
		}
	}
	return tasks
}

// createdTaskID reads N from a TaskCreate result's text, "Task #N created
// successfully: …" (a string or a list of text blocks); only the number is
// taken, never the text.
func createdTaskID(content json.RawMessage) string {
	var text string
	if json.Unmarshal(content, &text) != nil {
		var blocks []struct {
			Text str `json:"text"`
		}
		if json.Unmarshal(content, &blocks) != nil || len(blocks) == 0 {
			return ""
		}
		text = blocks[0].Text.v
	}
	rest, ok := strings.CutPrefix(text, "Task #")
	if !ok {
		return ""
	}
	n := 0
	for n < len(rest) && n < 20 && '0' <= rest[n] && rest[n] <= '9' {
		n++
	}
	if n == 0 || !strings.HasPrefix(rest[n:], " created") {
		return ""
	}
	id, err := strconv.ParseUint(rest[:n], 10, 64)
	if err != nil {
		return ""
	}
	return strconv.FormatUint(id, 10)
}

func containsAny(line []byte, words [][]byte) bool {
	for _, w := range words {
		if bytes.Contains(line, w) {
			return true
		}
	}
	return false
}
