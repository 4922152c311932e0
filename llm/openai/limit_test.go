package openai

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/llm"
)

// countingTransport counts the bytes the client reads from response bodies.
type countingTransport struct {
	next http.RoundTripper
	read atomic.Int64
}

func (ct *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := ct.next.RoundTrip(r)
	if res != nil && res.Body != nil {
		res.Body = &countingBody{ReadCloser: res.Body, n: &ct.read}
	}
	return res, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

const smallCap = 64 << 10

// serveCapped returns a client with MaxResponseBytes smallCap for a server
// answering with handler, and the count of body bytes the client read.
func serveCapped(t *testing.T, max int64, handler http.HandlerFunc) (*Client, *countingTransport) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	ct := &countingTransport{next: srv.Client().Transport}
	return New(Config{APIKey: testKey, BaseURL: srv.URL + "/v1", HTTPClient: &http.Client{Transport: ct}, MaxResponseBytes: max}), ct
}

func completionBody(content string) string {
	c, _ := json.Marshal(content)
	return `{"id":"x","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":` + string(c) + `}}]}`
}

func checkTooLarge(t *testing.T, err error, max int64) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *llm.Error", err, err)
	}
	if !errors.Is(err, ErrResponseTooLarge) || llm.IsRetryable(err) || e.Kind != llm.KindUnknown {
		t.Errorf("error %v: kind %v, retryable %v, Is(ErrResponseTooLarge) %v", err, e.Kind, llm.IsRetryable(err), errors.Is(err, ErrResponseTooLarge))
	}
	if !strings.Contains(e.Message, "exceeded "+strconv.FormatInt(max, 10)+" bytes") || !strings.Contains(e.Message, "MaxResponseBytes") {
		t.Errorf("message %q should name the cap and Config.MaxResponseBytes", e.Message)
	}
}

// checkRead: reading stopped near the cap instead of taking the whole body.
func checkRead(t *testing.T, ct *countingTransport, max int64) {
	t.Helper()
	if n := ct.read.Load(); n > 2*max+64<<10 {
		t.Errorf("read %d bytes of the body with a cap of %d", n, max)
	}
}

func TestMaxResponseBytesComplete(t *testing.T) {
	huge := completionBody(strings.Repeat("a", 1<<20))
	c, ct := serveCapped(t, smallCap, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, huge)
	})
	resp, err := c.Complete(t.Context(), userReq("hi"))
	if resp != nil {
		t.Fatalf("got a reply of %d bytes past the cap", len(resp.Message.Content))
	}
	checkTooLarge(t, err, smallCap)
	checkRead(t, ct, smallCap)
}

// TestMaxResponseBytesErrorBody: a huge error page is cut at the cap, not
// read whole (openai-go reads error bodies itself), and is still
// classified by its status.
func TestMaxResponseBytesErrorBody(t *testing.T) {
	c, ct := serveCapped(t, smallCap, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>"+strings.Repeat("x", 4<<20))
	})
	_, err := c.Complete(t.Context(), userReq("hi"))
	if llm.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("%v: kind %v", err, llm.KindOf(err))
	}
	checkRead(t, ct, smallCap)
}

// TestMaxResponseBytesStreamAnsweredWithJSON: a stream answered with one
// JSON body is capped like Complete.
func TestMaxResponseBytesStreamAnsweredWithJSON(t *testing.T) {
	huge := completionBody(strings.Repeat("a", 1<<20))
	c, ct := serveCapped(t, smallCap, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, huge)
	})
	text, resp, err := collectStream(c)
	if resp != nil || text != "" {
		t.Fatalf("got %d bytes of text past the cap", len(text))
	}
	checkTooLarge(t, err, smallCap)
	checkRead(t, ct, smallCap)
}

func collectStream(c *Client) (text string, resp *llm.Response, err error) {
	var b strings.Builder
	for ch, e := range c.Stream(stdctx.Background(), userReq("hi")) {
		if e != nil {
			return b.String(), nil, e
		}
		b.WriteString(ch.Text)
		if ch.Response != nil {
			resp = ch.Response
		}
	}
	return b.String(), resp, nil
}

func TestMaxResponseBytesStream(t *testing.T) {
	textDelta := func(s string) string {
		b, _ := json.Marshal(s)
		return `{"choices":[{"index":0,"delta":{"content":` + string(b) + `}}]}`
	}
	argsDelta := func(first bool, s string) string {
		b, _ := json.Marshal(s)
		head := `"index":0`
		if first {
			head += `,"id":"c1","type":"function","function":{"name":"write","arguments":` + string(b) + `}`
		} else {
			head += `,"function":{"arguments":` + string(b) + `}`
		}
		return `{"choices":[{"index":0,"delta":{"tool_calls":[{` + head + `}]}}]}`
	}
	cases := map[string]func(w http.ResponseWriter){
		"one huge line": func(w http.ResponseWriter) {
			sse(w, textDelta(strings.Repeat("a", 1<<20)), `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")
		},
		"one huge event over many data lines": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"")
			for range 1 << 10 {
				io.WriteString(w, strings.Repeat("a", 1<<10)+"\ndata: ")
			}
			io.WriteString(w, "\"}}]}\n\ndata: [DONE]\n\n")
		},
		"many small text chunks": func(w http.ResponseWriter) {
			p := make([]string, 0, 1<<10+2)
			for range 1 << 10 {
				p = append(p, textDelta(strings.Repeat("a", 1<<10)))
			}
			sse(w, append(p, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")...)
		},
		"many small argument chunks": func(w http.ResponseWriter) {
			p := []string{argsDelta(true, `{"text":"`)}
			for range 1 << 10 {
				p = append(p, argsDelta(false, strings.Repeat("a", 1<<10)))
			}
			sse(w, append(p, argsDelta(false, `"}`), finishCalls2, "[DONE]")...)
		},
		"text and arguments together": func(w http.ResponseWriter) {
			p := []string{argsDelta(true, `{"text":"`)}
			for range 1 << 9 {
				p = append(p, textDelta(strings.Repeat("a", 1<<10)), argsDelta(false, strings.Repeat("a", 1<<10)))
			}
			sse(w, append(p, argsDelta(false, `"}`), finishCalls2, "[DONE]")...)
		},
	}
	for name, write := range cases {
		t.Run(name, func(t *testing.T) {
			c, ct := serveCapped(t, smallCap, func(w http.ResponseWriter, r *http.Request) { write(w) })
			text, resp, err := collectStream(c)
			if resp != nil {
				t.Fatalf("final reply past the cap: %d bytes of content, %d calls", len(resp.Message.Content), len(resp.Message.ToolCalls))
			}
			if len(text) > smallCap {
				t.Errorf("yielded %d bytes of text with a cap of %d", len(text), smallCap)
			}
			checkTooLarge(t, err, smallCap)
			if name == "one huge line" || name == "one huge event over many data lines" {
				checkRead(t, ct, smallCap)
			}
		})
	}
}

// TestMaxResponseBytesDefault: the zero Config gets DefaultMaxResponseBytes,
// and a large but ordinary reply under it is read unchanged, whole and
// streamed.
func TestMaxResponseBytesDefault(t *testing.T) {
	if DefaultMaxResponseBytes < 4<<20 {
		t.Fatalf("DefaultMaxResponseBytes %d is below the largest real replies", DefaultMaxResponseBytes)
	}
	if got := New(Config{}).maxBytes; got != DefaultMaxResponseBytes {
		t.Fatalf("zero Config: cap %d", got)
	}
	content := strings.Repeat("é", 1<<19) // 1 MiB
	c, _ := serveCapped(t, 0, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, completionBody(content))
			return
		}
		p := []string{}
		for i := 0; i < len(content); i += 1 << 12 {
			b, _ := json.Marshal(content[i : i+1<<12])
			p = append(p, `{"choices":[{"index":0,"delta":{"content":`+string(b)+`}}]}`)
		}
		sse(w, append(p, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")...)
	})
	resp, err := c.Complete(t.Context(), userReq("hi"))
	if err != nil || resp.Message.Content != content {
		t.Fatalf("Complete: %v", err)
	}
	text, resp, err := collectStream(c)
	if err != nil || resp.Message.Content != content || text != content {
		t.Fatalf("Stream: %v", err)
	}
}

// TestMaxResponseBytesMaxInt64: the largest cap (documented as the way to
// have none) does not overflow into a negative one.
func TestMaxResponseBytesMaxInt64(t *testing.T) {
	c, _ := serveCapped(t, math.MaxInt64, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, completionBody("hello"))
			return
		}
		sse(w, textChunk, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")
	})
	resp, err := c.Complete(t.Context(), userReq("hi"))
	if err != nil || resp.Message.Content != "hello" {
		t.Fatalf("Complete: %v", err)
	}
	if _, resp, err = collectStream(c); err != nil || resp.Message.Content != "Hel" {
		t.Fatalf("Stream: %v", err)
	}
}
