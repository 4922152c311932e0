package transcript_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type fetchIn struct {
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
}

// Secrets the user, the model and a tool write — in the user's message, a
// tool's arguments, a tool's result, a tool's error and the model's reply
// — appear nowhere in the transcript; the text around them does.
func TestTranscriptRedactsSecrets(t *testing.T) {
	secrets := map[string]string{
		"user message":      "sk-" + "proj-USERabcdefghijklmnopqrstuvwxyz0123",
		"tool argument":     "ARGSECRET1",
		"argument in a URL": "URLSECRET2",
		"tool result":       "RESULTSECRET3",
		"tool error":        "ERRSECRET4",
		"model reply":       "ghp_" + "REPLYabcdefghijklmnopqrstuvwxyz012345",
		"model call":        "CALLARG5",
	}
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(
			llmtest.Call("fetch", `{"url":"https://api.x/y?api_key=`+secrets["argument in a URL"]+`","token":"`+secrets["tool argument"]+`"}`),
			llmtest.Call("fail", `{"url":"https://h/?password=`+secrets["model call"]+`"}`),
		),
		llmtest.Text("Done. Your new key is "+secrets["model reply"]+"."),
	)
	fetch := tool.New("fetch", "Fetch a URL", func(ctx context.Context, in fetchIn) (string, error) {
		return "HTTP 200\nSet-Cookie: session=" + secrets["tool result"] + "\n\nok", nil
	})
	fail := tool.New("fail", "Fail", func(ctx context.Context, in fetchIn) (string, error) {
		return "", errors.New("GET https://h/?access_token=" + secrets["tool error"] + " refused")
	})
	var out syncBuffer
	obs := newObserver(t, transcript.Config{Writer: &out})
	o := newOrch(t, s, obs, agent.Config{Tools: []tool.Tool{fetch, fail}})
	res, err := o.HandleMessage(context.Background(), msg("Please use my key "+secrets["user message"]+" to fetch it"))
	if err != nil || res.Status != agent.StatusCompleted {
		t.Fatalf("res %+v, err %v", res, err)
	}
	flush(t, obs)
	text := out.String()
	for where, secret := range secrets {
		if strings.Contains(text, secret) {
			t.Errorf("the %s's secret is in the transcript:\n%s", where, text)
		}
	}
	for _, want := range []string{"Please use my key ***", "Set-Cookie: ***", "access_token=***", "Your new key is ***", `\"token\":\"***\"`, "api_key=***"} {
		if !strings.Contains(text, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, text)
		}
	}
	recs, err := transcript.Read(strings.NewReader(text))
	if err != nil || len(recs) == 0 {
		t.Fatalf("Read: %d records, %v", len(recs), err)
	}
}
