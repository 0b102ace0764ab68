// Package guardtest gives the upstream fakes and the daemon's tests the
// capsule guard the daemon runs: capsule/guard with the published schema
// (capsule/schema). Tests only; the daemon builds its own from its config.
package guardtest

import (
	"sync"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/capsule/schema"
)

// shared is built on first use: building a Guard compiles the secret
// rules (tens of milliseconds), and a Guard is immutable once built.
var shared = sync.OnceValues(func() (*guard.Guard, error) {
	sch, err := schema.Compile()
	if err != nil {
		return nil, err
	}
	return guard.New(guard.Options{CapsuleSchema: sch})
})

// Shared returns the process's one Guard with the default options and the
// published capsule schema; it is safe for concurrent use.
func Shared() (*guard.Guard, error) { return shared() }
