package agent_test

import (
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/controltest"
)

func TestMemoryControlConformance(t *testing.T) {
	controltest.Run(t, func(t *testing.T) agent.Control {
		c, err := agent.NewMemoryControl(agent.MemoryControlConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}
