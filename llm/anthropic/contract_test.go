package anthropic

import (
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

const testKey = "sk-ant-api03-llmtest-0123456789abcdef"

// The behaviour every valet llm.Client shares, against the fake Messages API.
func TestClientContract(t *testing.T) {
	llmtest.ClientContract(t, func(t *testing.T, model llm.Client) (llm.Client, llmtest.FaultInjector) {
		srv := llmtest.NewAnthropicServer(model, llmtest.WithAPIKey(testKey))
		t.Cleanup(srv.Close)
		return New(Config{APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.Client()}), srv
	})
}
