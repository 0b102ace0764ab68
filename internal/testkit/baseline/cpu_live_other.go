//go:build !linux

package baseline

import "time"

// LiveChildrenCPU is not measured here: it is always 0.
func LiveChildrenCPU() time.Duration { return 0 }

// ThreadCPU is not measured here: it is always 0.
func ThreadCPU() time.Duration { return 0 }
