package agent

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/valetkit/valet/llm"
)

// Metric names: the GenAI semantic conventions' and valet's own.
const (
	metricTokenUsage   = "gen_ai.client.token.usage"
	metricOpDuration   = "gen_ai.client.operation.duration"
	metricToolDuration = "gen_ai.execute_tool.duration"
	metricToolErrors   = "valet.tool.errors"
	metricCost         = "valet.cost.usd"
)

// instruments are an orchestrator's metric instruments, made once by
// NewOrchestrator.
type instruments struct {
	tokens   metric.Int64Histogram
	opDur    metric.Float64Histogram
	toolDur  metric.Float64Histogram
	toolErrs metric.Int64Counter
	cost     metric.Float64Counter
	opts     optCache
}

// optKey names a set of a measurement's attributes.
type optKey struct {
	kind                                  uint8 // optChat, optTokens, optTool
	model, respModel, purpose, name, errT string
}

const (
	optChat uint8 = iota
	optTokensIn
	optTokensOut
	optTool
)

// maxCachedOpts bounds optCache: past it, attribute sets are made per
// measurement (tool names come from the model).
const maxCachedOpts = 1024

// optCache keeps the attribute sets of measurements, made once each: a
// measurement then costs no allocation for its attributes.
type optCache struct {
	mu sync.RWMutex
	m  map[optKey]metric.MeasurementOption
}

// get returns the option of k, made by attrs when it is new.
func (c *optCache) get(k optKey, attrs func(k optKey) []attribute.KeyValue) metric.MeasurementOption {
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	o = metric.WithAttributeSet(attribute.NewSet(attrs(k)...))
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[optKey]metric.MeasurementOption)
	}
	if len(c.m) < maxCachedOpts {
		c.m[k] = o
	}
	c.mu.Unlock()
	return o
}

// The bucket boundaries the GenAI semantic conventions advise.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

func newInstruments(m metric.Meter) (*instruments, error) {
	var (
		in   instruments
		errs [5]error
	)
	in.tokens, errs[0] = m.Int64Histogram(metricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens of each model call, by gen_ai.token.type (input, output), as the model reported them."),
		metric.WithExplicitBucketBoundaries(tokenBuckets...))
	in.opDur, errs[1] = m.Float64Histogram(metricOpDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each model call attempt; failed ones carry error.type."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.toolDur, errs[2] = m.Float64Histogram(metricToolDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each tool or Agent-Tool call; failed ones carry error.type."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.toolErrs, errs[3] = m.Int64Counter(metricToolErrors, metric.WithUnit("{call}"),
		metric.WithDescription("Tool and Agent-Tool calls that failed, by gen_ai.tool.name and error.type."))
	in.cost, errs[4] = m.Float64Counter(metricCost, metric.WithUnit("{USD}"),
		metric.WithDescription("What runs cost in US dollars (Result.Consumed.CostUSD), by valet.tenant.id."))
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return &in, nil
}

// chat records one model call attempt: its duration, and its tokens when
// it succeeded.
func (in *instruments) chat(ctx context.Context, provider attribute.KeyValue, model string, purpose llm.Purpose, resp *llm.Response, errType string, d time.Duration) {
	k := optKey{kind: optChat, model: model, purpose: string(purpose), errT: errType}
	if resp != nil {
		k.respModel = resp.Model
	}
	attrs := func(k optKey) []attribute.KeyValue {
		kv := []attribute.KeyValue{attrOperation.String(opChat), provider, attrRequestModel.String(k.model), attrPurpose.String(k.purpose)}
		if k.respModel != "" {
			kv = append(kv, attrResponseModel.String(k.respModel))
		}
		if k.errT != "" {
			kv = append(kv, attrErrorType.String(k.errT))
		}
		switch k.kind {
		case optTokensIn:
			kv = append(kv, attrTokenType.String("input"))
		case optTokensOut:
			kv = append(kv, attrTokenType.String("output"))
		}
		return kv
	}
	in.opDur.Record(ctx, d.Seconds(), in.opts.get(k, attrs))
	if errType != "" || resp == nil {
		return
	}
	if n := resp.Usage.InputTokens; n > 0 {
		k.kind = optTokensIn
		in.tokens.Record(ctx, int64(n), in.opts.get(k, attrs))
	}
	if n := resp.Usage.OutputTokens; n > 0 {
		k.kind = optTokensOut
		in.tokens.Record(ctx, int64(n), in.opts.get(k, attrs))
	}
}

// tool records one tool call: its duration, and a failure.
func (in *instruments) tool(ctx context.Context, name, errType string, d time.Duration) {
	opt := in.opts.get(optKey{kind: optTool, name: name, errT: errType}, toolAttrs)
	in.toolDur.Record(ctx, d.Seconds(), opt)
	if errType != "" {
		in.toolErrs.Add(ctx, 1, opt)
	}
}

func toolAttrs(k optKey) []attribute.KeyValue {
	kv := []attribute.KeyValue{attrOperation.String(opExecuteTool), attrToolName.String(k.name)}
	if k.errT != "" {
		kv = append(kv, attrErrorType.String(k.errT))
	}
	return kv
}
