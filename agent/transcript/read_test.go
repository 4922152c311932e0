package transcript_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
)

// Lines that are not records — a line torn by a crash, a blank line, a
// stray object — are skipped: Read returns the others and an error naming
// the first bad line and counting them.
func TestReadSkipsMalformedLines(t *testing.T) {
	in := `{"kind":"run_start","seq":1,"run_id":"r1"}

{"kind":"model_request","seq":2,"ru
{"hello":"world"}
{"kind":"run_end","seq":3,"run_id":"r1","result":{"status":"completed","turns":1,"usage":{"input_tokens":1,"output_tokens":2}}}
{"kind":"run_end","seq":4,"run_id":"r2"` // torn, no final line feed
	recs, err := transcript.Read(strings.NewReader(in))
	if !errors.Is(err, transcript.ErrMalformed) || !strings.Contains(err.Error(), "3 skipped") || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want ErrMalformed naming line 3 and counting 3", err)
	}
	if len(recs) != 2 || recs[0].Kind != agent.StepRunStart || recs[1].Kind != agent.StepRunEnd || recs[1].Result.Turns != 1 {
		t.Fatalf("records %+v", recs)
	}
	if _, err := transcript.Read(strings.NewReader("")); err != nil {
		t.Errorf("an empty transcript: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []transcript.Config{
		{},
		{Writer: &strings.Builder{}, Dir: "x"},
		{Writer: &strings.Builder{}, Buffer: -1},
		{Writer: &strings.Builder{}, MaxText: -2},
	} {
		if _, err := transcript.New(cfg); !errors.Is(err, transcript.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
