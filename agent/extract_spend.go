package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/valetkit/valet/llm"
)

// guardExtraction asks the SpendGuard for a fact extraction's model call
// req, as a run's calls are: Check, then, when the guard is a
// SpendReserver, Reserve of the call's largest cost (req.MaxTokens, set
// to ReserveOutputTokens when unset, of output at the dearest price the
// orchestrator's client may answer with). A refused extraction is
// skipped: logged, and given to the Observer as a StepSpendRefused of
// Purpose llm.PurposeRememberFacts. ok is false then.
func (o *Orchestrator) guardExtraction(ctx context.Context, x extraction, req *llm.Request, log *slog.Logger) (settle SettleSpend, ok bool) {
	err := o.guard.Check(ctx, x.tenant)
	if rs, isReserver := o.guard.(SpendReserver); err == nil && isReserver {
		if req.MaxTokens <= 0 {
			req.MaxTokens = ReserveOutputTokens
		}
		input := o.ctxm.Tokens(req.Messages) + toolTokens(o, req.Tools)
		price := o.dearestPrice(o.llm, o.priceOf(req.Model, ""))
		settle, err = rs.Reserve(ctx, x.tenant, price.Cost(llm.Usage{InputTokens: input, OutputTokens: req.MaxTokens}))
		if err == nil && settle == nil {
			err = errors.New("agent: the spend guard's Reserve returned no settle function")
		}
	}
	if err == nil {
		return settle, true
	}
	if ctx.Err() != nil {
		log.InfoContext(ctx, "agent: fact extraction skipped: the orchestrator is closing", "err", err)
		return nil, false
	}
	log.InfoContext(ctx, "agent: fact extraction skipped: the spend guard refused it", "err", err)
	if x.ended != nil {
		reason := DefaultRefusalReason
		if re := (*RefusalError)(nil); errors.As(err, &re) && strings.TrimSpace(re.Reason) != "" {
			reason = re.Reason
		}
		o.observeExtraction(ctx, x, Step{Kind: StepSpendRefused, Request: llm.Request{Purpose: req.Purpose}, Text: reason, Err: err})
	}
	return nil, false
}

// countExtraction tells the SpendGuard what a fact extraction's model
// call cost: its reservation (settle, when one was made) is settled with
// the cost (0 when the call failed), and Record gets the call's tokens,
// with its cost only when no settlement counted it. Failures are logged.
// It runs when the extraction's ctx has ended too.
func (o *Orchestrator) countExtraction(ctx context.Context, x extraction, req *llm.Request, resp *llm.Response, callErr error, settle SettleSpend, log *slog.Logger) {
	var c Consumed
	if callErr == nil {
		u := resp.Usage
		if u == (llm.Usage{}) {
			u = llm.Usage{InputTokens: o.ctxm.Tokens(req.Messages) + toolTokens(o, req.Tools), OutputTokens: o.ctxm.MessageTokens(resp.Message)}
		}
		c = Consumed{Tokens: u.Total(), CostUSD: o.priceOf(req.Model, resp.Model).Cost(u)}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spendRecordTimeout)
	defer cancel()
	if settle != nil {
		if err := settle(ctx, c.CostUSD); err != nil {
			log.ErrorContext(ctx, "agent: settling the fact extraction's spend reservation failed", "cost_usd", c.CostUSD, "err", err)
		} else {
			c.CostUSD = 0 // counted by the settlement
		}
	}
	if c.Tokens == 0 && c.CostUSD == 0 {
		return
	}
	if err := o.guard.Record(ctx, x.tenant, c); err != nil {
		log.ErrorContext(ctx, "agent: recording the fact extraction's spend failed", "err", err)
	}
}
