package guardtest

import "testing"

// TestSharedChecksCapsules: the guard given out validates capsules
// against the schema (a Guard without it refuses every capsule), and
// Shared gives the same one each time.
func TestSharedChecksCapsules(t *testing.T) {
	g, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Shared(); err != nil || again != g {
		t.Fatalf("Shared gave two guards (%p, %p) or %v", g, again, err)
	}
	if _, err := g.DecodeCapsule([]byte(`{"version":"1","goal":"ship"}`)); err != nil {
		t.Errorf("a valid capsule: %v", err)
	}
	if _, err := g.DecodeCapsule([]byte(`{"version":"2"}`)); err == nil {
		t.Error("version 2 accepted")
	}
}
