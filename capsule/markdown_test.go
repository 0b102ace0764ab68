package capsule

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func ptr[T any](v T) *T { return &v }

// fullResume has something in every section Markdown renders.
func fullResume() *Resume {
	now := time.Now()
	return &Resume{
		Agent: "builder",
		Focus: "migrate the billing module",
		WorkingState: &WorkingStateRecord{NextAction: "swap the callsites in checkout", LastResult: "adapters written",
			WaitingFor: ptr("review from the payments team"), ResultRef: ptr("repo@a1b2c3d"), UpdatedAt: now},
		Commitments: []Commitment{
			{ID: "c1", Title: "ship the parser fix", Status: CommitmentOpen, OpenedAt: now},
			{ID: "c2", Title: "an old promise kept", Status: CommitmentClosed, OpenedAt: now},
		},
		Decisions: []DecisionRecord{
			{Decision: Decision{Chosen: "d1", Because: "the first reason given here"}},
			{Decision: Decision{Chosen: "d2", Because: "the second reason given here"}},
			{Decision: Decision{Chosen: "d3", Because: "the third reason given here"}},
			{Decision: Decision{Chosen: "d4", Because: "the fourth reason given here"}},
			{Decision: Decision{Chosen: "d5", Because: "the fifth reason given here"}},
			{Decision: Decision{Chosen: "d6", Because: "the sixth reason given here", PassedOver: "d0"}},
		},
		Capsule:        &CapsuleRecord{Capsule: Capsule{Version: "1", DoNot: "do not touch the ledger", Refuted: "the cache is not the cause"}},
		Receipts:       []string{"receipt-old", "receipt-new"},
		SinceLastVisit: SinceLastVisit{Since: now.Add(-time.Hour), Writes: 3, PathCount: 2, Paths: []string{"a.go", "b.go"}, Commits: []string{"abc123 fix"}},
		Context:        ContextState{UsedFraction: ptr(0.83), Compactions: 2},
		Upstreams:      []UpstreamState{{Name: "qday", State: UpstreamRetrying, Pending: 4, DeadLetter: 1, LastError: ptr("503 busy")}},
		Degraded:       []string{"watch"},
	}
}

// The sections come most important first, each once, with what they hold.
func TestMarkdownSectionsInOrder(t *testing.T) {
	md := fullResume().Markdown(0)
	order := []string{"# Where builder was", "## Goal\nmigrate the billing module", "## Next\nswap the callsites in checkout",
		"## Blockers\nreview from the payments team", "## Do not\ndo not touch the ledger", "## Refuted\nthe cache is not the cause",
		"## Done\nadapters written\n(result: repo@a1b2c3d)", "## Open commitments\n- [c1] ship the parser fix",
		"## Recent decisions\n- d6, because the sixth reason given here (passed over: d0)", "## Receipts\n- receipt-new\n- receipt-old",
		"## Since last visit (1.0 h ago)\n- 3 writes\n- 2 paths changed: a.go, b.go\n- commit abc123 fix",
		"## Context\n- context 83% used\n- 2 compactions", "## Upstream health\n- qday: retrying, 4 pending, 1 in dead letter, last error: 503 busy\n- degraded: watch"}
	at := 0
	for _, want := range order {
		i := strings.Index(md[at:], want)
		if i < 0 {
			t.Fatalf("missing or out of order: %q\n%s", want, md)
		}
		at += i + len(want)
	}
	if strings.Contains(md, "an old promise kept") {
		t.Errorf("a closed commitment is listed as open:\n%s", md)
	}
	if strings.Contains(md, "- d1,") || !strings.Contains(md, "- d2,") {
		t.Errorf("recent decisions are the last five:\n%s", md)
	}
	if strings.Contains(md, "left out") {
		t.Errorf("limit 0 leaves nothing out:\n%s", md)
	}
}

func TestMarkdownEmptyAndFallbacks(t *testing.T) {
	md := (&Resume{Agent: "builder"}).Markdown(0)
	if !strings.Contains(md, "Nothing saved yet") || strings.Contains(md, "## ") {
		t.Errorf("an empty resume says nothing is saved:\n%s", md)
	}
	// No focus or working state: the capsule's draft fills goal, next,
	// done and blockers.
	r := &Resume{Agent: "builder", Stopped: &StopRecord{Reason: "operator said so", At: time.Now()},
		Capsule: &CapsuleRecord{Capsule: Capsule{Version: "1", Goal: "draft goal", Next: "draft next", Done: "draft done", Blockers: "draft blockers"}}}
	md = r.Markdown(0)
	for _, want := range []string{"**The residency is stopped** (operator said so", "## Goal\ndraft goal", "## Next\ndraft next", "## Done\ndraft done", "## Blockers\ndraft blockers"} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q:\n%s", want, md)
		}
	}
}

// A limit leaves whole sections out from the end, says so, and keeps the
// text under the limit.
func TestMarkdownLimit(t *testing.T) {
	r := fullResume()
	for i := 0; i < 40; i++ {
		r.Receipts = append(r.Receipts, strings.Repeat("r", 60))
	}
	full := r.Markdown(0)
	const limit = 1000
	if len(full) <= limit {
		t.Fatalf("the test needs a resume over %d characters; it is %d", limit, len(full))
	}
	md := r.Markdown(limit)
	if n := utf8.RuneCountInString(md); n > limit {
		t.Errorf("%d characters, over the limit %d:\n%s", n, limit, md)
	}
	for _, want := range []string{"## Goal", "## Next", "## Recent decisions"} {
		if !strings.Contains(md, want) {
			t.Errorf("the most important sections stay; %q is missing:\n%s", want, md)
		}
	}
	for _, gone := range []string{"## Receipts", "## Context", "## Upstream health"} {
		if strings.Contains(md, gone) {
			t.Errorf("%q should be left out under the limit:\n%s", gone, md)
		}
	}
	if !strings.Contains(md, "4 more sections left out to stay under 1000 characters") {
		t.Errorf("the last line says how many sections were left out:\n%s", md)
	}
}

// The limit counts characters, as its callers do (a hook's additionalContext
// is bounded in characters): a goal that fits in characters is not left out
// because its characters take several bytes each.
func TestMarkdownLimitCountsCharacters(t *testing.T) {
	r := &Resume{Agent: "builder", Focus: strings.Repeat("界", 4000)} // 4000 characters, 12000 bytes
	md := r.Markdown(10000)
	if !strings.Contains(md, "## Goal\n"+r.Focus) {
		t.Errorf("a 4000-character goal fits under 10000 characters but was left out:\n%.300s", md)
	}
	if n := utf8.RuneCountInString(md); n > 10000 {
		t.Errorf("%d characters, over the limit", n)
	}
}

// TestMarkdownNamesARefusalsMachineAndField: a part of the fleet's state
// that was refused is shown with where it came from and the rule.
func TestMarkdownNamesARefusalsMachineAndField(t *testing.T) {
	r := &Resume{Agent: "builder", Refused: []Refusal{{Source: "fleet fleet state", Machine: "node-7",
		Error: Error{Code: CodeTooManyOpenLoops, Field: "commitments", Message: "300 open"}}}}
	md := r.Markdown(0)
	if !strings.Contains(md, "- refused fleet fleet state (written by machine node-7): TOO_MANY_OPEN_LOOPS at commitments 300 open") {
		t.Fatalf("markdown:\n%s", md)
	}
}
