package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/client"
)

// An unreachable daemon is one sentence: where, why, and what to do; exit
// 3, also when the error comes wrapped.
func TestFailUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&client.UnreachableError{Socket: "/s.sock", Reason: "no socket there (is the daemon running?)"},
			"continuityd: the daemon is not reachable at /s.sock: no socket there (is the daemon running?); start it with `continuityd run`"},
		{fmt.Errorf("status: %w", &client.UnreachableError{Socket: "/s.sock", NoAnswer: true, Within: 10 * time.Second, Reason: "…"}),
			"continuityd: the daemon at /s.sock took the connection but gave no answer within 10s (a stuck daemon, or something else listening there)"},
	} {
		var stderr bytes.Buffer
		e := &Env{Stderr: &stderr}
		if code := Fail(e, c.err); code != ExitUnreachable || !strings.HasPrefix(stderr.String(), c.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("Fail(%v): exit %d, %q; want 3 and one line starting %q", c.err, code, stderr.String(), c.want)
		}
	}
}
