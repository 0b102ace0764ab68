//go:build !unix

package baseline

import "time"

// ProcessCPU is not measured here: it is always 0, and the benchmarks
// then omit their CPU figures.
func ProcessCPU() time.Duration { return 0 }

// ChildrenCPU is not measured here: it is always 0.
func ChildrenCPU() time.Duration { return 0 }
