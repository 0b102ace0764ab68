// Package testwait is how a test waits for something the code under test
// does in its own time: it asks for the condition again and again, and
// after a deadline generous enough for a loaded machine fails with what it
// saw last. Tests never sleep for a fixed time instead (tests only).
package testwait

import (
	"testing"
	"time"
)

// Limit is how long Until waits: far beyond what any condition takes on a
// quiet machine, so only something that never happens reaches it.
const Limit = 60 * time.Second

// poll is the pause between two looks at the condition.
const poll = 10 * time.Millisecond

// Until returns once ok holds, and fails t after Limit with what(), the
// state last seen, when it never does.
func Until(t testing.TB, what func() string, ok func() bool) {
	t.Helper()
	until(t, Limit, what, ok)
}

func until(t testing.TB, limit time.Duration, what func() string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v: %s", limit, what())
			return
		}
		time.Sleep(poll)
	}
}
