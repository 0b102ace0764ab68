package upstream

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// An answer of exactly the limit is read whole; one byte more is an
// AnswerTooLargeError, never a silent cut.
func TestLimitBody(t *testing.T) {
	const limit = 10
	for _, c := range []struct {
		body    string
		tooLong bool
	}{{"", false}, {"0123456789", false}, {"0123456789x", true}, {strings.Repeat("y", 5000), true}} {
		b, err := io.ReadAll(LimitBody(io.NopCloser(strings.NewReader(c.body)), limit))
		var tl *AnswerTooLargeError
		if got := errors.As(err, &tl); got != c.tooLong || !c.tooLong && (err != nil || string(b) != c.body) {
			t.Errorf("%d bytes: read %d bytes, err %v", len(c.body), len(b), err)
		}
		if len(b) > limit {
			t.Errorf("%d bytes: read %d bytes past the limit", len(c.body), len(b))
		}
	}
}
