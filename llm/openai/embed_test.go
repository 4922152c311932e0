package openai

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// newEmbedE2E returns the fake OpenAI server with emb and a client of it.
func newEmbedE2E(t *testing.T, emb llm.Embedder, cfg Config) (*llmtest.Server, *Client) {
	t.Helper()
	srv := llmtest.NewServer(llmtest.NewScript(), llmtest.WithAPIKey(testKey), llmtest.WithEmbedder(emb))
	t.Cleanup(srv.Close)
	cfg.APIKey, cfg.BaseURL, cfg.HTTPClient = testKey, srv.URL, srv.Client()
	return srv, New(cfg)
}

func TestEmbedE2E(t *testing.T) {
	emb := llmtest.NewEmbedder(32).Concept("dentist", "teeth")
	srv, c := newEmbedE2E(t, emb, Config{EmbeddingBatchSize: 3})
	texts := []string{"one dentist", "two teeth", "three", "four", "five", "six", "seven"}
	got, err := c.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := emb.Embed(t.Context(), texts)
	if len(got) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(got), len(texts))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("vector %d (%q) differs from the embedder's", i, texts[i])
		}
	}
	reqs := srv.Requests()
	var batches [][]string
	for _, r := range reqs {
		if r.Path != "/v1/embeddings" || r.Status != 200 || r.Header.Get("Authorization") != "Bearer "+testKey {
			t.Errorf("request %s status %d auth %q", r.Path, r.Status, r.Header.Get("Authorization"))
		}
		var body struct {
			Model          string `json:"model"`
			EncodingFormat string `json:"encoding_format"`
			Dimensions     *int   `json:"dimensions"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Model != DefaultEmbeddingModel || body.EncodingFormat != "float" || body.Dimensions != nil {
			t.Errorf("request body %s", r.Body)
		}
		batches = append(batches, r.Inputs)
	}
	if !slices.EqualFunc(batches, [][]string{texts[:3], texts[3:6], texts[6:]}, slices.Equal) {
		t.Errorf("batches %q, want 3 + 3 + 1 texts in order", batches)
	}

	// Nothing to embed: no request.
	if v, err := c.Embed(t.Context(), nil); v != nil || err != nil {
		t.Errorf("Embed(nil) = %v, %v", v, err)
	}
	if v, err := c.Embed(t.Context(), []string{}); v != nil || err != nil {
		t.Errorf("Embed([]) = %v, %v", v, err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests after empty Embeds, want 3", n)
	}
}

func TestEmbedConfig(t *testing.T) {
	emb := llmtest.NewEmbedder(16)
	srv, c := newEmbedE2E(t, emb, Config{EmbeddingModel: "nomic-embed-text", EmbeddingDimensions: 8})
	if c.EmbeddingModel() != "nomic-embed-text" {
		t.Errorf("EmbeddingModel() = %q", c.EmbeddingModel())
	}
	v, err := c.Embed(t.Context(), []string{"alpha beta"})
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || len(v[0]) != 8 {
		t.Fatalf("got %d vectors of %d, want 1 of 8 (dimensions)", len(v), len(v[0]))
	}
	var body struct {
		Model      string `json:"model"`
		Dimensions int    `json:"dimensions"`
		Input      []string
	}
	if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "nomic-embed-text" || body.Dimensions != 8 || !slices.Equal(body.Input, []string{"alpha beta"}) {
		t.Errorf("request body %+v", body)
	}

	// The batch size is capped at OpenAI's limit; the default applies to zero.
	if c := New(Config{EmbeddingBatchSize: 1 << 20}); c.embBatch != MaxEmbeddingInputs {
		t.Errorf("batch size %d, want %d", c.embBatch, MaxEmbeddingInputs)
	}
	if c := New(Config{}); c.embBatch != DefaultEmbeddingBatchSize || c.EmbeddingModel() != DefaultEmbeddingModel {
		t.Errorf("defaults: batch size %d, model %q", c.embBatch, c.EmbeddingModel())
	}
}

// embeddingsBody is an embeddings reply of vecs at the given indexes.
func embeddingsBody(indexes []int, vecs [][]float32) string {
	var b strings.Builder
	b.WriteString(`{"object":"list","model":"m","data":[`)
	for i, v := range vecs {
		if i > 0 {
			b.WriteString(",")
		}
		nums, _ := json.Marshal(v)
		fmt.Fprintf(&b, `{"object":"embedding","index":%d,"embedding":%s}`, indexes[i], nums)
	}
	b.WriteString(`],"usage":{"prompt_tokens":1,"total_tokens":1}}`)
	return b.String()
}

func TestEmbedReplies(t *testing.T) {
	b64 := func(v ...float32) string {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return `"` + base64.StdEncoding.EncodeToString(b) + `"`
	}
	two := []string{"a", "b"}
	for _, tc := range []struct {
		name    string
		body    string
		want    [][]float32
		invalid bool          // llm.ErrInvalidEmbeddings, KindUnknown
		kind    llm.ErrorKind // otherwise, when want is nil
	}{
		{name: "in order", body: embeddingsBody([]int{0, 1}, [][]float32{{1, 2}, {3, 4}}), want: [][]float32{{1, 2}, {3, 4}}},
		{name: "reversed", body: embeddingsBody([]int{1, 0}, [][]float32{{3, 4}, {1, 2}}), want: [][]float32{{1, 2}, {3, 4}}},
		{name: "no index", body: `{"data":[{"embedding":[1,2]},{"embedding":[3,4]}]}`, want: [][]float32{{1, 2}, {3, 4}}},
		{name: "base64", body: `{"data":[{"index":1,"embedding":` + b64(3, 4) + `},{"index":0,"embedding":` + b64(1, 2) + `}]}`, want: [][]float32{{1, 2}, {3, 4}}},
		{name: "too few", body: embeddingsBody([]int{0}, [][]float32{{1, 2}}), invalid: true},
		{name: "too many", body: embeddingsBody([]int{0, 1, 2}, [][]float32{{1}, {2}, {3}}), invalid: true},
		{name: "index repeated", body: embeddingsBody([]int{0, 0}, [][]float32{{1, 2}, {3, 4}}), invalid: true},
		{name: "index out of range", body: embeddingsBody([]int{0, 2}, [][]float32{{1, 2}, {3, 4}}), invalid: true},
		{name: "negative index", body: embeddingsBody([]int{-1, 0}, [][]float32{{1, 2}, {3, 4}}), invalid: true},
		{name: "lengths differ", body: embeddingsBody([]int{0, 1}, [][]float32{{1, 2}, {3, 4, 5}}), invalid: true},
		{name: "empty vector", body: embeddingsBody([]int{0, 1}, [][]float32{{1, 2}, {}}), invalid: true},
		{name: "null vector", body: `{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":null}]}`, invalid: true},
		{name: "NaN in base64", body: `{"data":[{"index":0,"embedding":` + b64(1) + `},{"index":1,"embedding":` + b64(float32(math.NaN())) + `}]}`, invalid: true},
		{name: "no data", body: `{"object":"list"}`, invalid: true},
		{name: "not JSON", body: `<html>bad gateway</html>`, kind: llm.KindUnavailable},
		{name: "strings in a vector", body: `{"data":[{"index":0,"embedding":["x"]},{"index":1,"embedding":[1]}]}`, kind: llm.KindUnavailable},
		{name: "bad base64", body: `{"data":[{"index":0,"embedding":"!!!"},{"index":1,"embedding":[1]}]}`, kind: llm.KindUnavailable},
		{name: "error in a 200", body: `{"error":{"message":"Rate limit reached","code":429}}`, kind: llm.KindRateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/embeddings" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, tc.body)
			})
			got, err := c.Embed(t.Context(), two)
			switch {
			case tc.want != nil:
				if err != nil || !slices.EqualFunc(got, tc.want, slices.Equal) {
					t.Errorf("Embed = %v, %v; want %v", got, err, tc.want)
				}
			case tc.invalid:
				if got != nil || !errors.Is(err, llm.ErrInvalidEmbeddings) || llm.KindOf(err) != llm.KindUnknown || llm.IsRetryable(err) {
					t.Errorf("Embed = %v, %v (kind %v); want llm.ErrInvalidEmbeddings, kind unknown", got, err, llm.KindOf(err))
				}
			default:
				if got != nil || llm.KindOf(err) != tc.kind || errors.Is(err, llm.ErrInvalidEmbeddings) {
					t.Errorf("Embed = %v, %v (kind %v); want kind %v", got, err, llm.KindOf(err), tc.kind)
				}
			}
		})
	}
}

// TestEmbedBatchesDisagree: vectors of different lengths from two
// requests fail the call.
func TestEmbedBatchesDisagree(t *testing.T) {
	var n atomic.Int32
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			io.WriteString(w, embeddingsBody([]int{0}, [][]float32{{1, 2}}))
		} else {
			io.WriteString(w, embeddingsBody([]int{0}, [][]float32{{1, 2, 3}}))
		}
	})
	c.embBatch = 1
	got, err := c.Embed(t.Context(), []string{"a", "b"})
	if got != nil || !errors.Is(err, llm.ErrInvalidEmbeddings) || n.Load() != 2 {
		t.Errorf("Embed = %v, %v after %d requests; want llm.ErrInvalidEmbeddings after 2", got, err, n.Load())
	}
}

func TestEmbedErrors(t *testing.T) {
	emb := llmtest.NewEmbedder(4)
	srv, c := newEmbedE2E(t, emb, Config{EmbeddingBatchSize: 1})

	srv.Inject(llmtest.RateLimited(3 * time.Second))
	_, err := c.Embed(t.Context(), []string{"a"})
	if llm.KindOf(err) != llm.KindRateLimited || llm.RetryAfter(err) != 3*time.Second {
		t.Errorf("429: %v (kind %v, retry after %v)", err, llm.KindOf(err), llm.RetryAfter(err))
	}

	// A failure in the second batch fails the call; no more requests follow.
	srv.Inject(llmtest.Fault{}, llmtest.Unavailable(502))
	before := len(srv.Requests())
	got, err := c.Embed(t.Context(), []string{"a", "b", "c"})
	if got != nil || llm.KindOf(err) != llm.KindUnavailable || !llm.IsRetryable(err) {
		t.Errorf("502 in the second batch: %v, %v", got, err)
	}
	if n := len(srv.Requests()) - before; n != 2 {
		t.Errorf("%d requests, want 2 (the third batch is not sent)", n)
	}

	emb.Fail(&llm.Error{Kind: llm.KindContextOverflow, Message: "This model's maximum context length is 8192 tokens, however you requested 9000 tokens"})
	if _, err := c.Embed(t.Context(), []string{"long"}); llm.KindOf(err) != llm.KindContextOverflow {
		t.Errorf("input too long: %v (kind %v)", err, llm.KindOf(err))
	}
	emb.Fail(nil)

	// A wrong key: 401, and the key is not echoed back.
	bad := New(Config{APIKey: "sk-wrong-key-0123456789", BaseURL: srv.URL, HTTPClient: srv.Client()})
	_, err = bad.Embed(t.Context(), []string{"a"})
	if llm.KindOf(err) != llm.KindAuth || strings.Contains(fmt.Sprint(err), "sk-wrong-key-0123456789") {
		t.Errorf("wrong key: %v (kind %v)", err, llm.KindOf(err))
	}
}

func TestEmbedKeyRedacted(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","code":"invalid_api_key"}}`, testKey)
	})
	_, err := c.Embed(t.Context(), []string{"a"})
	if llm.KindOf(err) != llm.KindAuth || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "REDACTED") {
		t.Errorf("Embed = %v", err)
	}
}

// TestEmbedNoSecretInErrorChain: a refused connection to a BaseURL with
// credentials in its query leaves none in the error chain.
func TestEmbedNoSecretInErrorChain(t *testing.T) {
	cfg := secretConfig("http://127.0.0.1:1/openai/deployments/x?api-version=2024-10-21&api-key=" + querySecret)
	_, err := New(cfg).Embed(t.Context(), []string{"a"})
	if llm.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("%v: kind %v", err, llm.KindOf(err))
	}
	for _, leak := range chainSecrets(err, allSecrets(cfg)) {
		t.Errorf("secret in the error chain: %s", leak)
	}
	var ue *url.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.URL, "/openai/deployments/x/embeddings") || !strings.Contains(ue.URL, "api-key=REDACTED") {
		t.Errorf("url.Error %v", ue)
	}
}

// TestEmbedAzureURL: the query of BaseURL goes with the embeddings
// request, below the deployment's path.
func TestEmbedAzureURL(t *testing.T) {
	var got string
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Path + "?" + r.URL.RawQuery + " api-key=" + r.Header.Get("api-key")
		io.WriteString(w, embeddingsBody([]int{0}, [][]float32{{1}}))
	})
	srvURL := strings.TrimSuffix(c.baseURL, "/v1")
	az := New(Config{BaseURL: srvURL + "/openai/deployments/emb?api-version=2024-10-21", Headers: map[string]string{"api-key": "k"}})
	if _, err := az.Embed(t.Context(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if want := "/openai/deployments/emb/embeddings?api-version=2024-10-21 api-key=k"; got != want {
		t.Errorf("request %q, want %q", got, want)
	}
}

func TestEmbedResponseTooLarge(t *testing.T) {
	big := make([]float32, 4096)
	for i := range big {
		big[i] = 0.0123456789
	}
	c, ct := serveCapped(t, smallCap, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, embeddingsBody([]int{0, 1}, [][]float32{big, big}))
	})
	_, err := c.Embed(t.Context(), []string{"a", "b"})
	if !errors.Is(err, ErrResponseTooLarge) || llm.KindOf(err) != llm.KindUnknown {
		t.Errorf("Embed = %v, want ErrResponseTooLarge", err)
	}
	if n := ct.read.Load(); n > smallCap+64<<10 {
		t.Errorf("read %d bytes with a cap of %d", n, smallCap)
	}
}

func TestEmbedCancelled(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select { // hang until the client goes away
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	done := make(chan error, 1)
	go func() {
		_, err := c.Embed(ctx, []string{"a"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || llm.IsRetryable(err) {
			t.Errorf("Embed after cancel = %v", err)
		}
	case <-time.After(10 * time.Second): // a failsafe, not a timing assertion
		t.Fatal("Embed did not return after its context was cancelled")
	}
}

func TestEmbeddingModelFromEnv(t *testing.T) {
	t.Setenv(EnvAPIKey, "sk-env")
	for _, want := range []string{"", "text-embedding-3-large"} {
		t.Setenv(EnvEmbeddingModel, want)
		c, err := FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if got := c.EmbeddingModel(); got != cmp.Or(want, DefaultEmbeddingModel) {
			t.Errorf("%s=%q: model %q", EnvEmbeddingModel, want, got)
		}
	}
}
