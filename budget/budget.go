package budget

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalid is wrapped by the error of Limits.Check and Consumed.Check:
// a negative cap or amount, or a dollar figure that is not a finite
// number. agent.ErrInvalidBudget is this same error; trigger wraps it
// in trigger.ErrInvalid where it checks a task or a run.
var ErrInvalid = errors.New("budget: invalid")

// Limits caps what one run may spend: its model calls' tokens and cost,
// its wall clock and its tool calls. A zero field is no cap, so the zero
// Limits is unlimited.
//
// agent.Budget (a message's or a loop's budget) and trigger.Budget (a
// task's budget) are this type: the agent package documents how a run
// keeps within it. The JSON names are those a stored task has always had:
// a task stored before Limits existed decodes to the same caps.
type Limits struct {
	// MaxTokens caps the input plus output tokens of every model call of
	// the run. Zero: no cap.
	MaxTokens int `json:"max_tokens,omitempty"`
	// MaxCostUSD caps the estimated cost of those calls, in US dollars.
	// Zero: no cap.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// MaxWall caps the run's wall clock. Zero: no cap.
	MaxWall time.Duration `json:"max_wall,omitempty"`
	// MaxToolCalls caps the tool calls run. Zero: no cap.
	MaxToolCalls int `json:"max_tool_calls,omitempty"`
}

// IsZero reports whether l sets no cap.
func (l Limits) IsZero() bool { return l == Limits{} }

// Check reports a negative cap, or a MaxCostUSD that is not an amount of
// money (negative, NaN or infinite), wrapping ErrInvalid.
func (l Limits) Check() error {
	if l.MaxTokens < 0 || l.MaxWall < 0 || l.MaxToolCalls < 0 {
		return fmt.Errorf("%w: negative cap in %+v", ErrInvalid, l)
	}
	if notAmount(l.MaxCostUSD) {
		return fmt.Errorf("%w: MaxCostUSD %v is not an amount of money", ErrInvalid, l.MaxCostUSD)
	}
	return nil
}

// Consumed is what a run used, measured as Limits caps it.
//
// agent.Consumed (agent.Result.Consumed, what a SpendGuard records) and
// trigger.Usage (a run's trigger.Run.Consumed) are this type. Tokens is
// the sum of llm.Usage.Total over the run's model calls: llm.Usage counts
// one call's input and output apart, Consumed the whole run. The JSON
// names are those a stored run has always had.
type Consumed struct {
	// Tokens is the input plus output tokens of the run's model calls,
	// estimated where a model reported none.
	Tokens int `json:"tokens,omitempty"`
	// CostUSD is their estimated cost in US dollars; 0 when the model has
	// no price.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Wall is the run's wall clock.
	Wall time.Duration `json:"wall,omitempty"`
	// ToolCalls is the tool calls run.
	ToolCalls int `json:"tool_calls,omitempty"`
}

// Check reports a negative measure, or a CostUSD that is not an amount of
// money (negative, NaN or infinite), wrapping ErrInvalid.
func (c Consumed) Check() error {
	if c.Tokens < 0 || c.Wall < 0 || c.ToolCalls < 0 {
		return fmt.Errorf("%w: negative amount in %+v", ErrInvalid, c)
	}
	if notAmount(c.CostUSD) {
		return fmt.Errorf("%w: CostUSD %v is not an amount of money", ErrInvalid, c.CostUSD)
	}
	return nil
}

// notAmount reports whether v is not an amount of money: negative, NaN
// or infinite.
func notAmount(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
