//go:build !unix

package daemon

import "time"

// processCPU is not measured here; the benchmarks then omit the CPU metrics.
func processCPU() time.Duration { return 0 }
