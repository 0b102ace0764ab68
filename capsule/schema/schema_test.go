package schema

import (
	"testing"
)

// TestCompileValidates: the compiled schema accepts a capsule and refuses
// what the published schema forbids (an unknown property, a version it
// does not list, a goal over 4,000 characters, no version).
func TestCompileValidates(t *testing.T) {
	rs, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	long := make([]rune, 4001)
	for i := range long {
		long[i] = 'g'
	}
	if err := rs.Validate(map[string]any{"version": "1", "goal": "ship", "ttl_days": 14.0}); err != nil {
		t.Errorf("a valid capsule: %v", err)
	}
	for name, bad := range map[string]map[string]any{
		"unknown property": {"version": "1", "extra": "x"},
		"version 2":        {"version": "2"},
		"goal 4001":        {"version": "1", "goal": string(long)},
		"no version":       {"goal": "ship"},
		"ttl_days float":   {"version": "1", "ttl_days": 1.5},
	} {
		if rs.Validate(bad) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
