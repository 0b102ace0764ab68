package capsule

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

func receipts(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("r%d", i))
	}
	return out
}

// The state maps onto the capsule's sections: focus → goal, next_action →
// next, last_result → done, waiting_for → blockers.
func TestSealMapsTheState(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	st := Resume{Agent: "builder", Focus: "the goal",
		WorkingState: &WorkingStateRecord{NextAction: "the next", LastResult: "the done", WaitingFor: ptr("the blocker")},
		Receipts:     []string{"repo@a1"}}
	c := Seal(st, nil, now)
	want := Capsule{Version: "1", Goal: "the goal", Next: "the next", Done: "the done", Blockers: "the blocker",
		Receipts: []string{"repo@a1"}, WrittenBy: "builder", WrittenAt: "2025-03-04T05:06:07Z"}
	if got, _ := json.Marshal(c); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("\n got %s\nwant %s", got, must(json.Marshal(want)))
	}
	if c := Seal(Resume{Agent: "builder"}, nil, now); c.Goal != "" || c.Next != "" || c.Receipts != nil {
		t.Errorf("nothing saved seals an empty capsule, got %+v", c)
	}
}

// The draft (the latest capsule) gives what the checkpoint model does not
// carry, and fills the sections the state leaves empty; the state wins.
func TestSealDraftFields(t *testing.T) {
	draft := &CapsuleRecord{Capsule: Capsule{Version: "1", Goal: "draft goal", Next: "draft next", Done: "draft done", Blockers: "draft blockers",
		DoNot: "draft do_not", Refuted: "draft refuted", HandoffTo: "reviewer", TTLDays: json.RawMessage(`7`)}}
	c := Seal(Resume{Agent: "builder"}, draft, time.Now())
	if c.Goal != "draft goal" || c.Next != "draft next" || c.Done != "draft done" || c.Blockers != "draft blockers" {
		t.Errorf("empty state sections come from the draft: %+v", c)
	}
	if c.DoNot != "draft do_not" || c.Refuted != "draft refuted" || c.HandoffTo != "reviewer" || string(c.TTLDays) != "7" {
		t.Errorf("do_not, refuted, handoff_to and ttl_days come from the draft: %+v", c)
	}
	st := Resume{Agent: "builder", Focus: "state goal", WorkingState: &WorkingStateRecord{NextAction: "state next", LastResult: "state done", WaitingFor: ptr("state blockers")}}
	c = Seal(st, draft, time.Now())
	if c.Goal != "state goal" || c.Next != "state next" || c.Done != "state done" || c.Blockers != "state blockers" {
		t.Errorf("the state wins over the draft: %+v", c)
	}
}

// Receipts: the draft's, then the residency's not already there, the
// newest CapsuleReceipts kept.
func TestSealReceiptsDedupedAndCapped(t *testing.T) {
	draft := &CapsuleRecord{Capsule: Capsule{Version: "1", Receipts: receipts(1, 5)}}
	c := Seal(Resume{Agent: "builder", Receipts: receipts(4, 8)}, draft, time.Now())
	if want := receipts(1, 8); !slices.Equal(c.Receipts, want) {
		t.Errorf("receipts %v, want %v (each once)", c.Receipts, want)
	}
	c = Seal(Resume{Agent: "builder", Receipts: receipts(4, 30)}, draft, time.Now())
	if want := receipts(11, 30); !slices.Equal(c.Receipts, want) || len(c.Receipts) != CapsuleReceipts {
		t.Errorf("receipts %v, want the newest %d: %v", c.Receipts, CapsuleReceipts, want)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
