package agent

import (
	"log/slog"
	"strings"
	"time"

	"github.com/valetkit/valet/llm"
)

// The levels of a run's lines (see "Runs and logs" in the package doc):
// one INFO line when the run ends, a WARN line per failed tool call, a
// DEBUG line per model call and per tool call. Each checks that its level
// is enabled before building its attributes, so a logger that drops the
// level costs a run no allocation.

// logEnd writes the run's one INFO line.
func (r *run) logEnd(res *Result, err error) {
	l := r.log()
	if !l.Enabled(r.ctx, slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{
		slog.String("status", string(res.Status)), slog.Int("turns", res.Turns), slog.Int("tool_calls", len(res.ToolCalls)),
		slog.Int("tokens_in", res.Usage.InputTokens), slog.Int("tokens_out", res.Usage.OutputTokens),
		slog.Float64("cost_usd", res.Consumed.CostUSD), slog.Duration("duration", res.Duration),
		slog.String("source", res.Source),
	}
	if res.TaskID != "" {
		attrs = append(attrs, slog.String("task_id", res.TaskID))
	}
	if err != nil {
		attrs = append(attrs, slog.String("err", maskText(err.Error())))
	}
	l.LogAttrs(r.ctx, slog.LevelInfo, "agent: run ended", attrs...)
}

// logModelCall writes a DEBUG line for a model call (one attempt).
func (r *run) logModelCall(req *llm.Request, resp *llm.Response, err error, d time.Duration) {
	l := r.log()
	if !l.Enabled(r.ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.String("purpose", string(req.Purpose)), slog.Int("messages", len(req.Messages)), slog.Duration("duration", d)}
	if resp != nil {
		attrs = append(attrs, slog.String("model", resp.Model), slog.String("finish_reason", resp.FinishReason),
			slog.Int("tokens_in", resp.Usage.InputTokens), slog.Int("tokens_out", resp.Usage.OutputTokens),
			slog.Int("tool_calls", len(resp.Message.ToolCalls)))
	}
	if err != nil {
		attrs = append(attrs, slog.String("kind", llm.KindOf(err).String()), slog.String("err", maskText(err.Error())))
	}
	l.LogAttrs(r.ctx, slog.LevelDebug, "agent: model call", attrs...)
}

// logToolResult writes a WARN line for a failed tool call, a DEBUG line
// for another one. A call parked for the user's input or approval has
// not failed.
func (r *run) logToolResult(rec *ToolCallRecord) {
	level, msg := slog.LevelDebug, "agent: tool call"
	if !rec.Success && !strings.HasPrefix(rec.ResultStatus, "waiting_") {
		level, msg = slog.LevelWarn, "agent: tool call failed"
	}
	l := r.log()
	if !l.Enabled(r.ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("tool", rec.Name), slog.String("call_id", rec.ID), slog.String("status", rec.ResultStatus),
		slog.Duration("duration", rec.Duration), slog.Int("attempts", rec.Attempts),
	}
	if level == slog.LevelWarn {
		attrs = append(attrs, slog.String("err", maskText(rec.Error)))
	} else {
		attrs = append(attrs, slog.String("args", rec.ArgsSummary), slog.Int("result_chars", rec.ResultChars))
	}
	l.LogAttrs(r.ctx, level, msg, attrs...)
}
