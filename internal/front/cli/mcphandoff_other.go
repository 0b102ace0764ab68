//go:build !unix

package cli

import "context"

// handMCPStdio: descriptors cannot be passed to the daemon here; the
// daemon side serves the client (handed is always false).
func handMCPStdio(context.Context, *Env, []string) (code int, handed bool) { return 0, false }
