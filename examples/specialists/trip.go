package main

// The booking tools of the later scenes, and the risk policy that decides
// from a payment's amount whether it runs, waits for the user or is
// refused.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// ReserveIn is reserve_room's input.
type ReserveIn struct {
	Hotel  string `json:"hotel" jsonschema:"description=The hotel's name"`
	Nights int    `json:"nights" jsonschema:"minimum=1,maximum=30,description=How many nights"`
}

// Desk is the hotels' booking desk: reserve_room's first call blocks
// until the demo releases it (a slow booking system), so the user can
// correct the loop while it waits.
type Desk struct {
	started, release chan struct{}
	once, released   sync.Once
}

// Release lets reserve_room's first call return.
func (d *Desk) Release() { d.released.Do(func() { close(d.release) }) }

func newDesk() *Desk { return &Desk{started: make(chan struct{}), release: make(chan struct{})} }

func (d *Desk) reserveTool() tool.Tool {
	return tool.New("reserve_room", "Reserve a room at a hotel for a number of nights from next Monday; returns the booking reference.",
		func(ctx context.Context, in ReserveIn) (string, error) {
			first := false
			d.once.Do(func() { first = true; close(d.started) })
			if first {
				select {
				case <-d.release:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return fmt.Sprintf("Reserved %s for %d nights from Monday, booking %s-%dN.", in.Hotel, in.Nights, bookingPrefix(in.Hotel), in.Nights), nil
		})
}

func bookingPrefix(hotel string) string {
	if hotel == "Hotel Jardim" {
		return "JAR"
	}
	return "BK"
}

// PayIn is pay_deposit's input.
type PayIn struct {
	To        string `json:"to" jsonschema:"description=Who is paid"`
	AmountEUR int    `json:"amount_eur" jsonschema:"minimum=1,description=The amount in euros"`
	Booking   string `json:"booking,omitempty" jsonschema:"description=The booking reference"`
}

// Payments records what pay_deposit really paid.
type Payments struct {
	mu   sync.Mutex
	paid []PayIn
}

// Paid returns the payments made.
func (p *Payments) Paid() []PayIn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PayIn(nil), p.paid...)
}

func (p *Payments) payTool() tool.Tool {
	return tool.New("pay_deposit", "Pay a hotel from the user's card.",
		func(ctx context.Context, in PayIn) (string, error) {
			p.mu.Lock()
			p.paid = append(p.paid, in)
			p.mu.Unlock()
			return fmt.Sprintf("Paid %d EUR to %s (booking %s), receipt R-%d.", in.AmountEUR, in.To, in.Booking, len(p.Paid())), nil
		}, tool.WithRisk(tool.RiskMedium))
}

// AvailabilityIn is check_availability's input.
type AvailabilityIn struct {
	Hotel string `json:"hotel" jsonschema:"description=The hotel's name"`
}

// availabilityTool asks a hotel whether it has a room: Casa do Rio's
// booking line never answers.
func availabilityTool() tool.Tool {
	return tool.New("check_availability", "Ask a hotel whether it has a room next week.",
		func(ctx context.Context, in AvailabilityIn) (string, error) {
			return "No answer: " + in.Hotel + "'s booking line is busy.", nil
		})
}

// Payment limits of the risk policy.
const (
	freePaymentEUR = 100  // up to this a payment runs
	maxPaymentEUR  = 1000 // up to this it waits for the user; above, refused
)

// riskPolicy decides a pay_deposit call's risk from its amount: small
// payments run, larger ones wait for the user's approval, and one above
// maxPaymentEUR is refused outright. Other calls keep their declared risk.
func riskPolicy(_ context.Context, call llm.ToolCall, declared tool.Risk) (tool.Risk, error) {
	if call.Name != "pay_deposit" {
		return declared, nil
	}
	var in PayIn
	if err := json.Unmarshal(call.Arguments, &in); err != nil {
		return tool.RiskCritical, err // denied; the model reads it was
	}
	switch {
	case in.AmountEUR <= freePaymentEUR:
		return tool.RiskLow, nil
	case in.AmountEUR <= maxPaymentEUR:
		return tool.RiskHigh, nil
	}
	return tool.RiskCritical, nil
}
