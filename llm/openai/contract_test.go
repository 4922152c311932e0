package openai

import (
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// The behaviour every valet llm.Client shares, against the fake OpenAI API.
func TestClientContract(t *testing.T) {
	llmtest.ClientContract(t, func(t *testing.T, model llm.Client) (llm.Client, llmtest.FaultInjector) {
		srv := llmtest.NewServer(model, llmtest.WithAPIKey(testKey))
		t.Cleanup(srv.Close)
		return New(Config{APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.Client()}), srv
	})
}
