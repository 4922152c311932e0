//go:build !unix

package agent_test

import "time"

// processCPU is not measured where getrusage is missing; the benchmarks then
// leave out their CPU figures.
func processCPU() (time.Duration, bool) { return 0, false }
