package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
)

// ErrMalformed is wrapped by Read's error when lines could not be read as
// records.
var ErrMalformed = errors.New("transcript: malformed lines")

// Read reads a transcript: one Record per line, blank lines ignored.
// Lines that are not records (a line torn by a crash, text from elsewhere)
// are skipped: Read returns every record it could read and an error
// wrapping ErrMalformed that counts them and names the first. Any other
// error is the reader's.
func Read(r io.Reader) ([]Record, error) {
	br := bufio.NewReader(r)
	var (
		recs     []Record
		bad      int
		firstBad error
	)
	for n := 1; ; n++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			var rec Record
			if jerr := json.Unmarshal(b, &rec); jerr != nil || rec.Kind == 0 {
				if bad++; firstBad == nil {
					if jerr == nil {
						jerr = errors.New("no kind")
					}
					firstBad = fmt.Errorf("line %d: %w", n, jerr)
				}
			} else {
				recs = append(recs, rec)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return recs, err
		}
	}
	if bad > 0 {
		return recs, fmt.Errorf("%w: %d skipped, first at %w", ErrMalformed, bad, firstBad)
	}
	return recs, nil
}

// RunSummary sums up one run of a transcript.
type RunSummary struct {
	RunID, Tenant, Conversation string
	// Start and End are the times of the run's first and last records.
	Start, End time.Time
	// Ended is set when the run's end is in the transcript; Status (an
	// agent.Status) is set then.
	Ended  bool
	Status string
	// Turns are the model calls of the run's loop (Result.Turns); without
	// the run's end, the model calls of purpose loop that returned.
	Turns int
	// ModelCalls counts every model call that returned or failed, each
	// attempt of a retried one and calls aside from the loop included;
	// Retries the retries among them.
	ModelCalls, Retries int
	// ToolCalls counts the run's tool calls; Tools has them by name.
	ToolCalls int
	Tools     map[string]ToolStats
	// InputTokens and OutputTokens are Result.Usage (the sum of the model
	// calls' usage without the run's end); CostUSD is
	// Result.Consumed.CostUSD (0 for a model with no price).
	InputTokens, OutputTokens int
	CostUSD                   float64
	// Errors are the failures of the run, its model calls (each attempt)
	// and its tools, in order, redacted as written.
	Errors []string
	// Duration is the run's (Result.Duration), or End-Start without its
	// end.
	Duration time.Duration
}

// ToolStats counts the calls of one tool: Errors those that failed (a
// call parked for the user's approval or input is not a failure).
type ToolStats struct{ Calls, Errors int }

// Summarize sums up each run of recs, in the order the runs start.
// Records of several runs may be interleaved (a Writer shared by
// concurrent conversations).
func Summarize(recs []Record) []RunSummary {
	var (
		out   []RunSummary
		index = map[string]int{}
	)
	for _, r := range recs {
		i, ok := index[r.RunID]
		if !ok {
			i = len(out)
			index[r.RunID] = i
			out = append(out, RunSummary{RunID: r.RunID, Tenant: r.Tenant, Conversation: r.Conversation, Start: r.Time,
				Tools: map[string]ToolStats{}})
		}
		s := &out[i]
		if r.Time.Before(s.Start) {
			s.Start = r.Time
		}
		if r.Time.After(s.End) {
			s.End = r.Time
		}
		switch r.Kind {
		case agent.StepModelResponse:
			s.ModelCalls++
			if r.Response != nil && !s.Ended {
				if r.Purpose == string(llm.PurposeLoop) {
					s.Turns++
				}
				s.InputTokens += r.Response.Usage.InputTokens
				s.OutputTokens += r.Response.Usage.OutputTokens
			}
		case agent.StepModelRetry:
			s.Retries++
		case agent.StepToolResult:
			if s.Ended || r.ToolRecord == nil {
				break
			}
			s.ToolCalls++
			addTool(s.Tools, *r.ToolRecord)
		case agent.StepRunEnd:
			if res := r.Result; res != nil {
				s.Ended, s.Status, s.Turns = true, res.Status, res.Turns
				s.InputTokens, s.OutputTokens, s.CostUSD = res.Usage.InputTokens, res.Usage.OutputTokens, res.CostUSD
				s.ToolCalls, s.Tools = len(res.ToolCalls), map[string]ToolStats{}
				for _, c := range res.ToolCalls {
					addTool(s.Tools, c)
				}
				s.Duration = fromMS(res.DurationMS)
			}
		}
		if r.Error != "" && r.Kind != agent.StepModelRetry { // a retry repeats the failed response's error
			s.Errors = append(s.Errors, r.Error)
		}
	}
	for i := range out {
		if s := &out[i]; !s.Ended {
			s.Duration = s.End.Sub(s.Start)
		}
	}
	return out
}

func addTool(m map[string]ToolStats, c ToolRecord) {
	t := m[c.Name]
	t.Calls++
	if !c.Success && !strings.HasPrefix(c.Status, "waiting") { // parked for the user is no failure
		t.Errors++
	}
	m[c.Name] = t
}
