//go:build race

package agent_test

// raceEnabled: the race detector is on, and allocation counts are its own.
const raceEnabled = true
