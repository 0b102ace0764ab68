package residency

import (
	"context"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// A's residency, as the fleet would hold it: its resume document after
// seq 3, and writes 4 and 5 the document did not include yet.
func fleetOf(t *testing.T) (*capsule.Resume, []capsule.Write) {
	t.Helper()
	a := open(t, t.TempDir(), "fleet")
	defer a.Close()
	ctx := context.Background()
	for _, cp := range []*capsule.Checkpoint{
		{Focus: str("migrate billing"), Decide: &capsule.Decision{Chosen: "retry", Because: "bursts over sixty a minute get dropped"}},
		{Commitments: &capsule.CommitmentOps{Open: []capsule.OpenCommitment{{Title: "ship the parser fix"}}}},
	} {
		if _, err := a.Checkpoint(ctx, cp, capsule.OriginExplicit); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.PutCapsule(ctx, &capsule.Capsule{Version: "1", Goal: "g"}, true, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	st := a.Resume()
	if _, err := a.Checkpoint(ctx, &capsule.Checkpoint{Stop: &capsule.Stop{Reason: "handing over"}}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Checkpoint(ctx, &capsule.Checkpoint{ResumeResidency: true, Focus: str("on the new machine")}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	ws, err := a.Pending("fleet", st.Seq, 100)
	if err != nil {
		t.Fatal(err)
	}
	return &st, ws
}

func TestImportOnEmptyContinuesTheSequence(t *testing.T) {
	st, ws := fleetOf(t)
	b := open(t, t.TempDir(), "fleet", "local")
	defer b.Close()
	ctx := context.Background()
	res, err := b.Import(ctx, Import{State: st, Writes: ws, SeqFloor: 5})
	if err != nil || res.Merged || res.Applied != 2 || res.Skipped != 0 || res.Seq != 5 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	r := b.Resume()
	if r.Focus != "on the new machine" || r.Stopped != nil || len(r.Decisions) != 1 || len(r.Commitments) != 1 ||
		r.Capsule == nil || !r.Capsule.Sealed || r.Capsule.Capsule.Goal != "g" {
		t.Fatalf("restored state: %+v", r)
	}
	if n, _ := b.PendingCount("fleet", 0); n != 0 {
		t.Fatalf("the replayed writes went to the outbox: %d pending", n)
	}
	seq, err := b.Checkpoint(ctx, &capsule.Checkpoint{Commitments: &capsule.CommitmentOps{Open: []capsule.OpenCommitment{{Title: "a second one"}}}}, capsule.OriginExplicit)
	if err != nil || seq != 6 {
		t.Fatalf("next write = %d, %v; want 6", seq, err)
	}
	r = b.Resume()
	if r.Commitments[1].ID != "c_2" {
		t.Fatalf("commitment ids restart: %+v", r.Commitments)
	}
	p, _ := b.Pending("fleet", 0, 10)
	if len(p) != 1 || p[0].Seq != 6 || p[0].IdempotencyKey != "cd-"+b.ResidencyID()+"-6" {
		t.Fatalf("outbox after import: %+v", p)
	}
}

func TestImportKeepsLocalWrites(t *testing.T) {
	st, _ := fleetOf(t)
	b := open(t, t.TempDir(), "fleet")
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Checkpoint(ctx, &capsule.Checkpoint{Focus: str("written while the fleet was down"),
		Commitments: &capsule.CommitmentOps{Open: []capsule.OpenCommitment{{Title: "local loop"}}}}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	res, err := b.Import(ctx, Import{State: st, SeqFloor: 5})
	if err != nil || !res.Merged || res.Seq != 5 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	r := b.Resume()
	if r.Focus != "written while the fleet was down" || len(r.Decisions) != 1 || len(r.Commitments) != 2 || r.Capsule == nil {
		t.Fatalf("merged: %+v", r)
	}
	if r.Commitments[0].ID == r.Commitments[1].ID {
		t.Fatalf("commitment ids collide: %+v", r.Commitments)
	}
	if seq, _ := b.Checkpoint(ctx, &capsule.Checkpoint{Focus: str("after")}, capsule.OriginExplicit); seq != 6 {
		t.Fatalf("next seq %d, want 6", seq)
	}
}
