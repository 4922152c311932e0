package main

// The later scenes: a long booking task kept in a plan, corrected while
// it runs, with a deposit that waits for the user; a payment the risk
// policy refuses; and a model going round in circles, stopped.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/valetkit/valet/agent"
)

// trip plays the later scenes in conv.
func trip(ctx context.Context, w io.Writer, o *agent.Orchestrator, ctl agent.Control, conv string, model *script, desk *Desk, payments *Payments) error {
	// 5. A task with several steps: the coordinator keeps a plan
	// (update_plan) and reserves the room; the booking system is slow.
	fmt.Fprintf(w, "\nyou> %s\n", bookMessage)
	type outcome struct {
		res *agent.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: tenantID, ConversationID: conv, Text: bookMessage})
		done <- outcome{res, err}
	}()
	select {
	case <-desk.started:
	case out := <-done:
		return fmt.Errorf("the booking ended before reserve_room ran: %v", out.err)
	}
	fmt.Fprintln(w, "  … reserve_room is waiting for the hotel's booking system …")

	// 6. While reserve_room waits, the user corrects the task: the message
	// is routed into the running loop (LoopConfig.RouteWhileRunning), which
	// sees it once the call under way returns.
	running, err := ctl.Running(ctx, tenantID, conv)
	if err != nil {
		desk.Release()
		<-done
		return err
	}
	heard := make(chan struct{})
	stopHearing := ctl.Subscribe(tenantID, conv, running, func(agent.Signal) {
		select {
		case <-heard:
		default:
			close(heard)
		}
	})
	// Should the message not be routed it would wait for the loop, which
	// waits for the booking system: release it after a while regardless.
	valve := time.AfterFunc(deliveryWait, desk.Release)
	defer valve.Stop()
	fmt.Fprintf(w, "\nyou> %s\n", correctMessage)
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: tenantID, ConversationID: conv, Text: correctMessage})
	if err != nil {
		stopHearing()
		desk.Release()
		<-done
		return err
	}
	fmt.Fprintf(w, "  (routed into the running loop: status %s, signal %s)\n", res.Status, res.Steered)
	if res.Status != agent.StatusInjected {
		desk.Release()
		<-done
		return fmt.Errorf("the correction was not routed into the running loop: %s", res.Status)
	}
	select {
	case <-heard: // the loop has the signal (through Redis with -redis)
	case <-ctx.Done():
		desk.Release()
		<-done
		return ctx.Err()
	}
	stopHearing()
	desk.Release()
	out := <-done
	if out.err != nil {
		return out.err
	}
	res = out.res
	if m := model.injectedMessage(); m != "" {
		fmt.Fprintf(w, "\nthe coordinator's next request, once reserve_room returned, ended with:\n%s\n\n", indent(m))
	}
	printRun(w, res)
	if res.Status != agent.StatusWaitingForApproval || len(res.PendingApprovals) != 1 {
		return fmt.Errorf("the deposit did not wait for approval: %s", res.Status)
	}
	printApproval(w, res.PendingApprovals[0], res.Waiting)
	if n := len(payments.Paid()); n != 0 {
		return fmt.Errorf("%d payments went out before the user approved", n)
	}

	// 7. The user approves: the deposit is paid once and the plan moves on.
	if res, err = send(ctx, w, o, conv, approveWith); err != nil {
		return err
	}
	if res.Plan != nil {
		fmt.Fprintf(w, "\nthe plan (Result.Plan):\n%s\n", indent(res.Plan.Markdown()))
	}

	// 8. A payment above the policy's limit is refused: it never runs and
	// the model reads why.
	if _, err := send(ctx, w, o, conv, groupMessage); err != nil {
		return err
	}

	// 9. The model goes round in circles on a hotel that never answers:
	// two notes ask it to change course, then the run is stopped with
	// ErrDoomLoop and the answer it can give.
	res, err = send(ctx, w, o, conv, backupMessage)
	if !errors.Is(err, agent.ErrDoomLoop) {
		return fmt.Errorf("the loop was not stopped going round in circles: %v", err)
	}
	notes := model.doomNotes()
	fmt.Fprintf(w, "  ↻ check_availability called %d times; %d notes, then stopped:\n", countCalls(res, "check_availability"), len(notes))
	for _, n := range notes {
		line, _, _ := strings.Cut(n, ".")
		fmt.Fprintf(w, "    %s.\n", line)
	}
	fmt.Fprintf(w, "  run ended: %v\n", err)
	if res != nil {
		fmt.Fprintf(w, "bot> %s\n", res.Response)
	}

	fmt.Fprintln(w, "\npayments (what was really paid):")
	for _, p := range payments.Paid() {
		fmt.Fprintf(w, "  %d EUR to %s (booking %s)\n", p.AmountEUR, p.To, p.Booking)
	}
	return nil
}

// printRun prints a run's tool calls and answer.
func printRun(w io.Writer, res *agent.Result) {
	for _, c := range res.ToolCalls {
		fmt.Fprintf(w, "  → %s: %s\n", c.Name, c.ResultStatus)
	}
	fmt.Fprintf(w, "bot> %s\n", strings.ReplaceAll(res.Response, "\n", "\n     "))
}

func countCalls(res *agent.Result, name string) int {
	if res == nil {
		return 0
	}
	n := 0
	for _, c := range res.ToolCalls {
		if c.Name == name {
			n++
		}
	}
	return n
}
