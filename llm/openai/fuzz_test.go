package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
)

// FuzzReadStream feeds arbitrary bodies to the SSE reader: it must never
// panic, must end with exactly one final response or one error (never
// both, never anything after either), and every tool call of a final
// response must have a unique id and object arguments. The seeds are the
// recorded streams of testdata plus hand-made edge cases.
func FuzzReadStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "openai-recorded", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var fx fixture
		if json.Unmarshal(b, &fx) != nil {
			continue
		}
		for _, ex := range fx.Exchanges {
			r := ex.Response
			switch {
			case r.SSE != nil:
				var sb strings.Builder
				for _, d := range r.SSE {
					sb.WriteString("data: " + d + "\n\n")
				}
				f.Add([]byte(sb.String()), false)
				if r.BodyRaw != nil {
					f.Add([]byte(*r.BodyRaw), false)
				}
			case r.BodyRaw != nil:
				f.Add([]byte(*r.BodyRaw), true)
			case len(r.Body) > 0:
				f.Add([]byte(r.Body), true)
			}
		}
	}
	for _, s := range []string{
		"data: " + textChunk + "\r\n\r\ndata: [DONE]\r\n\r\n",
		"data:" + textChunk + "\n\n",
		"event: error\ndata: {\"error\":{\"message\":\"x\",\"code\":429}}\n\n",
		"event: ping\n\n: comment\n\ndata: [DONE]",
		"data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":\\\"\xe6\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"name\":\"f\",\"arguments\":{}}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
		"data: {\"error\":{\"message\":\"boom\"}}\n\n",
		"data: [DONE]\n\ndata: garbage\n\n",
	} {
		f.Add([]byte(s), false)
	}
	c := New(Config{APIKey: testKey})
	f.Fuzz(func(t *testing.T, body []byte, asJSON bool) {
		ct := "text/event-stream"
		if asJSON {
			ct = "application/json"
		}
		res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(bytes.NewReader(body))}
		var final *llm.Response
		var failed error
		n := 0
		c.readStream(t.Context(), res, func(ch llm.Chunk, err error) bool {
			n++
			if final != nil || failed != nil {
				t.Fatalf("yield after the end: %+v %v", ch, err)
			}
			switch {
			case err != nil:
				if ch.Response != nil || ch.Text != "" {
					t.Fatalf("chunk and error together: %+v %v", ch, err)
				}
				if _, ok := err.(*llm.Error); !ok {
					t.Fatalf("unclassified error %T %v", err, err)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Fatalf("key in error %v", err)
				}
				failed = err
			case ch.Response != nil:
				if ch.Text != "" {
					t.Fatalf("final chunk with text %q", ch.Text)
				}
				final = ch.Response
			}
			return true
		})
		if (final == nil) == (failed == nil) {
			t.Fatalf("want exactly one of a response or an error; got %v and %v after %d yields", final, failed, n)
		}
		if final != nil {
			seen := map[string]bool{}
			for _, tc := range final.Message.ToolCalls {
				if tc.ID == "" || seen[tc.ID] {
					t.Fatalf("bad or repeated id %q", tc.ID)
				}
				seen[tc.ID] = true
				var obj map[string]any
				if json.Unmarshal(tc.Arguments, &obj) != nil || obj == nil {
					t.Fatalf("arguments %s not an object", tc.Arguments)
				}
			}
		}
	})
}
