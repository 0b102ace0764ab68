package testwait

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Until returns once the condition holds, having asked until it did.
func TestUntilReturnsWhenTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	Until(t, func() string { return "never" }, func() bool { return n.Add(1) == 3 })
	if n.Load() != 3 {
		t.Fatalf("asked %d times, want 3", n.Load())
	}
}

// recorder is a testing.TB that records its failure.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
}

// A condition that never holds fails the test with what was seen last.
func TestUntilFailsWithWhatItSaw(t *testing.T) {
	r := &recorder{TB: t}
	until(r, 50*time.Millisecond, func() string { return "the last state" }, func() bool { return false })
	if r.failure != "waited 50ms: the last state" {
		t.Fatalf("failure %q", r.failure)
	}
}
