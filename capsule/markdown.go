package capsule

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// Markdown renders the resume for a person or an agent's context, most
// important first: a restore interrupted, work lost, goal, next, blockers, do not, refuted, open commitments,
// decisions, receipts, since last visit, context, upstream health. When
// limit > 0 and the text would be longer, whole sections are left out from
// the end and a last line says so: nothing is cut silently. Every section
// goes through termsafe.Text before it is measured, and paths are quoted
// by termsafe.Name: what the text carries from a workdir, the fleet or an
// upstream never acts on the terminal or context it is shown in.
func (r *Resume) Markdown(limit int) string {
	now := time.Now()
	var sections []string
	add := func(title, body string) {
		if strings.TrimSpace(body) != "" {
			sections = append(sections, termsafe.Text("## "+title+"\n"+strings.TrimRight(body, "\n")+"\n"))
		}
	}
	var draft Capsule
	if r.Capsule != nil {
		draft = r.Capsule.Capsule
	}
	head := termsafe.Text(r.markdownHead(now))
	if ri := r.RestoreInterrupted; ri != nil {
		add("Restore interrupted", ri.Summary(now))
	}
	add("Work lost", r.workLostText(now)) // first: it may still be brought back
	goal := r.Focus
	if goal == "" {
		goal = draft.Goal
	}
	add("Conflicts", r.conflictsText())
	add("Goal", goal)
	next, done, blockers := r.workingStateText(now, draft)
	add("Next", next)
	add("Plan", r.planText(now))
	add("Blockers", blockers)
	add("Do not", draft.DoNot)
	add("Refuted", draft.Refuted)
	add("Done", done)
	add("Open commitments", r.openCommitmentsText(now))
	add("Recent decisions", r.decisionsText())
	add("Receipts", r.receiptsText())
	add("Snapshot", r.snapshotText(now))
	if slv := r.sinceLastVisitText(now); slv != "" {
		add(fmt.Sprintf("Since last visit (%s)", age(now, r.SinceLastVisit.Since)), slv)
	}
	add("Context", r.contextText())
	add("Upstream health", r.upstreamHealthText())

	if len(sections) == 0 {
		head += "\nNothing saved yet. Checkpoint as the work moves: `continuityd checkpoint --focus \"…\" --next \"…\"`.\n"
	}
	return fitSections(head, sections, limit)
}

// markdownHead is the title, and the stop of the residency if there is one.
func (r *Resume) markdownHead(now time.Time) string {
	head := fmt.Sprintf("# Where %s was\n", r.Agent)
	if r.Stopped != nil {
		head += fmt.Sprintf("\n**The residency is stopped** (%s, %s): checkpoints are refused until one carries resume_residency: true, on a new operator instruction.\n",
			r.Stopped.Reason, age(now, r.Stopped.At))
	}
	return head
}

// workingStateText returns the Next, Done and Blockers sections: the
// working state's, each falling back to the capsule draft's when empty.
func (r *Resume) workingStateText(now time.Time, draft Capsule) (next, done, blockers string) {
	if ws := r.WorkingState; ws != nil {
		next, done = ws.NextAction, ws.LastResult
		if ws.WaitingFor != nil {
			blockers = *ws.WaitingFor
		}
		if ws.ResultRef != nil && *ws.ResultRef != "" {
			done = strings.TrimSpace(done + "\n(result: " + *ws.ResultRef + ")")
		}
		if ws.Lost != "" && done != "" {
			done = "**Lost since**: the files of this work vanished without a commit (work lost " + ws.Lost +
				"; bring them back: `continuityd snapshot restore --lost " + ws.Lost + "`). It was:\n" + done
		}
		if next != "" {
			next += fmt.Sprintf("\n_(working state saved %s)_", age(now, ws.UpdatedAt))
		}
	}
	if next == "" {
		next = draft.Next
	}
	if done == "" {
		done = draft.Done
	}
	if blockers == "" {
		blockers = draft.Blockers
	}
	return next, done, blockers
}

func (r *Resume) openCommitmentsText(now time.Time) string {
	var open strings.Builder
	for _, c := range r.Commitments {
		if c.Status == CommitmentOpen {
			fmt.Fprintf(&open, "- [%s] %s (opened %s)\n", c.ID, c.Title, age(now, c.OpenedAt))
		}
	}
	return open.String()
}

// decisionsText lists the last five decisions, newest first.
func (r *Resume) decisionsText() string {
	var dec strings.Builder
	for i := len(r.Decisions) - 1; i >= 0 && i >= len(r.Decisions)-5; i-- {
		d := r.Decisions[i]
		fmt.Fprintf(&dec, "- %s, because %s", d.Chosen, d.Because)
		if d.PassedOver != "" {
			fmt.Fprintf(&dec, " (passed over: %s)", d.PassedOver)
		}
		dec.WriteString("\n")
	}
	return dec.String()
}

// planText is the agent's own plan, one step a line with its status.
func (r *Resume) planText(now time.Time) string {
	var b strings.Builder
	for _, s := range r.Plan {
		mark := "[ ]"
		switch s.Status {
		case PlanInProgress:
			mark = "[>]"
		case PlanCompleted:
			mark = "[x]"
		}
		if s.Lost != "" {
			fmt.Fprintf(&b, "- %s %s (**its work was lost since**: work lost %s)\n", mark, s.Step, s.Lost)
			continue
		}
		fmt.Fprintf(&b, "- %s %s\n", mark, s.Step)
	}
	if b.Len() > 0 && r.PlanUpdatedAt != nil {
		fmt.Fprintf(&b, "_(from the agent's transcript, %s)_\n", age(now, *r.PlanUpdatedAt))
	}
	return b.String()
}

// receiptsText lists the receipts, newest first.
func (r *Resume) receiptsText() string {
	var rc strings.Builder
	for i := len(r.Receipts) - 1; i >= 0; i-- {
		fmt.Fprintf(&rc, "- %s\n", r.Receipts[i])
	}
	return rc.String()
}

func (r *Resume) sinceLastVisitText(now time.Time) string {
	var slv strings.Builder
	s := r.SinceLastVisit
	if s.Writes > 0 {
		fmt.Fprintf(&slv, "- %d %s\n", s.Writes, Plural(s.Writes, "write", "writes"))
	}
	if s.PathCount > 0 {
		slv.WriteString(s.pathsText())
	}
	slv.WriteString(r.byOthersText())
	for _, c := range s.Commits {
		fmt.Fprintf(&slv, "- commit %s\n", c)
	}
	for _, h := range lastN(s.Head, 10) {
		fmt.Fprintf(&slv, "- HEAD: %s (%s)\n", termsafe.Text(h.Summary), age(now, h.At))
	}
	for _, sg := range lastN(s.Signals, 10) {
		fmt.Fprintf(&slv, "- %s (%s)\n", sg.Summary, age(now, sg.At))
	}
	return slv.String()
}

// snapshotText is the one line about the latest work snapshot.
func (r *Resume) snapshotText(now time.Time) string {
	s := r.Snapshot
	if s == nil {
		return ""
	}
	return fmt.Sprintf("last snapshot %s: %d %s; `continuityd snapshot diff`\n",
		age(now, s.At), s.Files, Plural(s.Files, "file", "files"))
}

func (r *Resume) contextText() string {
	var ctx strings.Builder
	if r.Context.UsedFraction != nil {
		fmt.Fprintf(&ctx, "- context %.0f%% used\n", *r.Context.UsedFraction*100)
	}
	if r.Context.Compactions > 0 {
		fmt.Fprintf(&ctx, "- %d %s\n", r.Context.Compactions, Plural(r.Context.Compactions, "compaction", "compactions"))
	}
	return ctx.String()
}

// upstreamHealthText lists each upstream's state, then what is degraded
// and the writes refused.
func (r *Resume) upstreamHealthText() string {
	var ups strings.Builder
	for _, u := range r.Upstreams {
		fmt.Fprintf(&ups, "- %s: %s", u.Name, u.State)
		if u.Pending > 0 {
			fmt.Fprintf(&ups, ", %d pending", u.Pending)
		}
		if u.DeadLetter > 0 {
			fmt.Fprintf(&ups, ", %d in dead letter", u.DeadLetter)
		}
		if u.LastError != nil {
			fmt.Fprintf(&ups, ", last error: %s", *u.LastError)
		}
		ups.WriteString("\n")
	}
	if len(r.Degraded) > 0 {
		fmt.Fprintf(&ups, "- degraded: %s\n", strings.Join(r.Degraded, ", "))
	}
	for _, rf := range r.Refused {
		from := ""
		if rf.Machine != "" {
			from = " (written by machine " + rf.Machine + ")"
		}
		what := rf.Error.Code
		if rf.Error.Field != "" {
			what += " at " + rf.Error.Field
		}
		fmt.Fprintf(&ups, "- refused %s%s: %s %s\n", rf.Source, from, what, rf.Error.Message)
	}
	return ups.String()
}

// fitSections joins head and the sections, leaving whole sections out from
// the end when limit > 0 and the text would pass it (less 200 characters
// of room for the last line, which says how many were left out). The limit
// is in characters, as its callers' are (a hook's additionalContext), not
// bytes: text that takes several bytes a character still fits.
func fitSections(head string, sections []string, limit int) string {
	out, n := head, utf8.RuneCountInString(head)
	for i, sec := range sections {
		m := utf8.RuneCountInString(sec)
		if limit > 0 && n+1+m > limit-200 {
			out += fmt.Sprintf("\n_(%d more sections left out to stay under %d characters; `continuityd resume --json` has everything.)_\n", len(sections)-i, limit)
			break
		}
		out += "\n" + sec
		n += 1 + m
	}
	return out
}

func lastN[T any](xs []T, n int) []T {
	if len(xs) > n {
		return xs[len(xs)-n:]
	}
	return xs
}

// age is a short human "how long ago".
func age(now, t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h ago", d.Hours())
	default:
		return fmt.Sprintf("%d days ago", int(d.Hours()/24))
	}
}

// pathsText is the line of changed paths. Its count says what it counts:
// paths when each changed once, else changes and the paths they touched
// ("9 changes to 3 paths: a.go (×3), …"); the list shows the ten most
// recent and says how many more there are.
func (s *SinceLastVisit) pathsText() string {
	distinct, listed := len(s.Paths), 0
	for _, p := range s.Paths {
		listed += max(s.PathCounts[p], 1)
	}
	var head string
	switch {
	case distinct == 0:
		return fmt.Sprintf("- %d %s\n", s.PathCount, Plural(s.PathCount, "path change", "path changes"))
	case s.PathCount == distinct:
		head = fmt.Sprintf("%d %s changed", distinct, Plural(distinct, "path", "paths"))
	case listed >= s.PathCount:
		head = fmt.Sprintf("%d changes to %d %s", s.PathCount, distinct, Plural(distinct, "path", "paths"))
	default: // the list keeps the most recent paths only
		head = fmt.Sprintf("%d changes to at least %d paths", s.PathCount, distinct+1)
	}
	paths := lastN(s.Paths, 10)
	shown := make([]string, len(paths))
	for i, p := range paths {
		shown[i] = termsafe.Name(p)
		if n := s.PathCounts[p]; n > 1 {
			shown[i] += fmt.Sprintf(" (×%d)", n)
		}
	}
	more := ""
	if n := distinct - len(paths); n > 0 {
		more = fmt.Sprintf(", and %d more", n)
	}
	return fmt.Sprintf("- %s: %s%s\n", head, strings.Join(shown, ", "), more)
}
