package transcript_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/llm/llmtest"
)

// blockingWriter blocks every Write until release is closed.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	out     syncBuffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return w.out.Write(p)
}

// A Writer that blocks does not hold runs up: they complete while it is
// stuck, the steps past the buffer are dropped (counted, logged once), and
// Flush gives up with its context.
func TestTranscriptBlockedWriterDoesNotHoldRunsUp(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	logs := newRecordLog()
	obs := newObserver(t, transcript.Config{Writer: w, Buffer: 1, Logger: slog.New(logs)})
	defer close(w.release) // before Close, which waits for the writer
	o := newOrch(t, llmtest.NewScript(llmtest.Text("one"), llmtest.Text("two"), llmtest.Text("three")), obs, agent.Config{})
	for range 3 {
		res, err := o.HandleMessage(context.Background(), msg("hi"))
		if err != nil || res.Status != agent.StatusCompleted {
			t.Fatalf("res %+v, err %v", res, err)
		}
	}
	<-w.entered
	if obs.Dropped() == 0 {
		t.Error("Dropped() = 0 with a stuck writer and a 1-byte buffer")
	}
	drops := 0
	for _, r := range logs.records() {
		if strings.Contains(r["msg"], "dropped") {
			drops++
		}
	}
	if drops != 1 {
		t.Errorf("%d log lines about drops, want 1: %v", drops, logs.records())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := obs.Flush(ctx); err != context.Canceled {
		t.Errorf("Flush with a stuck writer = %v, want context.Canceled", err)
	}
}
