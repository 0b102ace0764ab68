package guardtest

import (
	"testing"

	"github.com/continuityd/continuityd/capsule/guard"
)

// TestGuardsCheckCapsules: the guards given out validate capsules against
// the schema (a Guard without it refuses every capsule), and Shared is one.
func TestGuardsCheckCapsules(t *testing.T) {
	a, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Shared()
	if err != nil || a != b {
		t.Fatalf("Shared gave two guards (%p, %p) or %v", a, b, err)
	}
	c, err := New(guard.Options{AllowedLinkDomains: []string{"example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*guard.Guard{a, c} {
		if _, err := g.DecodeCapsule([]byte(`{"version":"1","goal":"ship"}`)); err != nil {
			t.Errorf("a valid capsule: %v", err)
		}
		if _, err := g.DecodeCapsule([]byte(`{"version":"2"}`)); err == nil {
			t.Error("version 2 accepted")
		}
	}
}
