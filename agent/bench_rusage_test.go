//go:build unix

package agent_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user+sys) the whole process has used so far,
// every thread included (the GC's workers too), from getrusage(RUSAGE_SELF).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
