package openai

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/valetkit/valet/llm"
)

// TestContextOverflowFigures: the window and the request size are read from
// overflow errors that state them, in each wording seen; nothing is
// guessed when one or both are missing.
func TestContextOverflowFigures(t *testing.T) {
	msg := func(s string) string {
		return `{"error":{"message":` + strconv.Quote(s) + `,"type":"invalid_request_error","code":"context_length_exceeded"}}`
	}
	cases := []struct {
		name        string
		status      int
		body        string
		kind        llm.ErrorKind
		limit, used int
	}{
		{"openai messages", 400, msg("This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages."), llm.KindContextOverflow, 128000, 130532},
		{"openai with completion", 400, msg("This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."), llm.KindContextOverflow, 4097, 4120},
		{"vllm", 400, `{"object":"error","message":"maximum context length is 8192 tokens, however you requested 9000 tokens (8000 in your prompt; 1000 for the completion). Please reduce your prompt; or completion length.","type":"BadRequestError","param":null,"code":400}`, llm.KindContextOverflow, 8192, 9000},
		{"comma however", 400, msg("This model's maximum context length is 4097 tokens, however you requested 5000 tokens"), llm.KindContextOverflow, 4097, 5000},
		{"requested a total of", 400, `{"object":"error","message":"Requested token count exceeds the model's maximum context length of 131072 tokens. You requested a total of 140000 tokens: 139000 tokens from the input messages and 1000 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.","type":"BadRequestError","code":400}`, llm.KindContextOverflow, 131072, 140000},
		{"thousands separators", 400, msg("This model's maximum context length is 128,000 tokens. However, your messages resulted in 130,532 tokens. Please reduce the length of the messages."), llm.KindContextOverflow, 128000, 130532},
		{"deepseek", 400, `{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (70000 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`, llm.KindContextOverflow, 65536, 70000},
		{"llama.cpp", 400, `{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}`, llm.KindContextOverflow, 8192, 13392},
		{"llama.cpp fields only", 400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":4096}}`, llm.KindContextOverflow, 4096, 9000},
		{"anthropic via proxy", 400, msg("prompt is too long: 210000 tokens > 200000 maximum"), llm.KindContextOverflow, 200000, 210000},
		{"limit only", 400, msg("This model's maximum context length is 8192 tokens. Please reduce the length of the messages."), llm.KindContextOverflow, 8192, 0},
		{"used only", 400, msg("Too many tokens: your messages resulted in 9000 tokens."), llm.KindContextOverflow, 0, 9000},
		{"no figures", 400, `{"error":"prompt is too long"}`, llm.KindContextOverflow, 0, 0},
		{"413 tokens per minute is no window", 413, `{"error":{"message":"Request too large for model llama-3.1-8b-instant on tokens per minute (TPM): Limit 6000, Requested 9000, please reduce your message size and try again.","type":"tokens","code":"rate_limit_exceeded"}}`, llm.KindContextOverflow, 0, 0},
		{"rate limit figures are no window", 429, `{"error":{"message":"Rate limit reached on tokens per min (TPM): Limit 30000, Used 29000, Requested 4000. Please try again in 6s. maximum context length is 128000 tokens","type":"tokens","code":"rate_limit_exceeded"}}`, llm.KindRateLimited, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := c.Complete(t.Context(), userReq("hi"))
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("%T %v", err, err)
			}
			if e.Kind != tc.kind || e.ContextLimit != tc.limit || e.ContextUsed != tc.used {
				t.Errorf("kind %v limit %d used %d, want %v %d %d (%v)", e.Kind, e.ContextLimit, e.ContextUsed, tc.kind, tc.limit, tc.used, err)
			}
		})
	}
}

// TestContextOverflowFiguresRecorded: the recorded OpenAI overflow error,
// replayed as sent.
func TestContextOverflowFiguresRecorded(t *testing.T) {
	fx := loadFixture(t, "openai_error_400_context_length_exceeded.json")
	srv := newReplayServer(t, fx)
	_, err := New(Config{APIKey: testKey, BaseURL: srv.URL + "/v1"}).Complete(t.Context(), userReq("hi"))
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindContextOverflow || e.ContextLimit != 4097 || e.ContextUsed != 4120 {
		t.Fatalf("%#v", e)
	}
}
