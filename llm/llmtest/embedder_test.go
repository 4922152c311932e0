package llmtest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

func embed(t *testing.T, e llm.Embedder, texts ...string) [][]float32 {
	t.Helper()
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatalf("Embed(%q): %v", texts, err)
	}
	if err := llm.CheckEmbeddings(len(texts), vecs); err != nil {
		t.Fatal(err)
	}
	return vecs
}

func TestEmbedderSimilarity(t *testing.T) {
	e := llmtest.NewEmbedder(0)
	if e.Dims() != llmtest.DefaultEmbedderDims {
		t.Fatalf("Dims = %d", e.Dims())
	}
	v := embed(t, e,
		"The user's dentist is Dr. Kim.",   // 0
		"the USER’S DENTIST is Dr Kim!!",   // 1: the same words
		"My dentist moved to Porto.",       // 2: one word shared with 0
		"The zebra ate a giraffe's lunch.", // 3: none shared with 0
		"What is it? The, a, my...",        // 4: common words only
		"Who fixes my teeth?",              // 5: no word of 0, no concept yet
	)
	for i, vec := range v[:4] {
		if len(vec) != e.Dims() {
			t.Fatalf("vector %d has %d dimensions", i, len(vec))
		}
		if n := cosine(vec, vec); math.Abs(n-1) > 1e-6 {
			t.Errorf("vector %d: length %v, want 1", i, n)
		}
	}
	if c := cosine(v[0], v[1]); c < 0.999 {
		t.Errorf("same words, case and punctuation aside: cosine %v, want 1", c)
	}
	if c := cosine(v[0], v[2]); c <= 0 || c >= cosine(v[0], v[1]) {
		t.Errorf("one shared word: cosine %v, want between 0 and 1", c)
	}
	if c := cosine(v[0], v[3]); c != 0 {
		t.Errorf("no shared word: cosine %v, want 0", c)
	}
	if !slices.Equal(v[4], make([]float32, e.Dims())) {
		t.Errorf("common words only: %v, want the zero vector", v[4])
	}
	if c := cosine(v[0], v[5]); c != 0 {
		t.Errorf("teeth before the concept: cosine %v, want 0", c)
	}

	// The same texts give the same vectors, on another Embedder too.
	again := embed(t, llmtest.NewEmbedder(0), "The user's dentist is Dr. Kim.")
	if !slices.Equal(again[0], v[0]) {
		t.Error("another Embedder gives another vector")
	}

	e.Concept("Dentist", "teeth", "ORTHODONTIST")
	w := embed(t, e, "The user's dentist is Dr. Kim.", "Who fixes my teeth?", "the orthodontist", "dentist")
	if c := cosine(w[0], w[1]); c <= 0 {
		t.Errorf("a word of the same concept: cosine %v, want > 0", c)
	}
	if c := cosine(w[2], w[3]); c < 0.999 {
		t.Errorf("two words of one concept: cosine %v, want 1", c)
	}
	// A common word named in a concept counts.
	e.Concept("where", "lives")
	w = embed(t, e, "Where?", "The user lives in Lisbon.")
	if c := cosine(w[0], w[1]); c <= 0 {
		t.Errorf("a common word named in a concept: cosine %v, want > 0", c)
	}
}

func TestEmbedderDims(t *testing.T) {
	for _, dims := range []int{1, 3, 1536} {
		v := embed(t, llmtest.NewEmbedder(dims), "alpha beta gamma", "delta")
		if len(v[0]) != dims || len(v[1]) != dims {
			t.Errorf("NewEmbedder(%d): vectors of %d and %d", dims, len(v[0]), len(v[1]))
		}
	}
	if got := llmtest.NewEmbedder(-5).Dims(); got != llmtest.DefaultEmbedderDims {
		t.Errorf("NewEmbedder(-5).Dims() = %d", got)
	}
}

func TestEmbedderFailAndCalls(t *testing.T) {
	e := llmtest.NewEmbedder(8)
	if vecs, err := e.Embed(context.Background(), nil); vecs != nil || err != nil {
		t.Errorf("Embed(nil) = %v, %v", vecs, err)
	}
	boom := &llm.Error{Kind: llm.KindUnavailable, Message: "boom"}
	e.Fail(boom)
	if vecs, err := e.Embed(context.Background(), []string{"hello"}); vecs != nil || !errors.Is(err, boom) {
		t.Errorf("after Fail: %v, %v", vecs, err)
	}
	e.Fail(nil)
	embed(t, e, "hello")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"hello"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	if n := e.Calls(); n != 4 {
		t.Errorf("Calls = %d, want 4", n)
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			e.Concept("x", "y")
			if _, err := e.Embed(context.Background(), []string{"x y z"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.Calls(); n != 12 {
		t.Errorf("Calls = %d, want 12", n)
	}
}

// postEmbeddings sends body to the server's embeddings endpoint.
func postEmbeddings(t *testing.T, srv *llmtest.Server, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/embeddings", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type embeddingsReply struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func TestServerEmbeddings(t *testing.T) {
	emb := llmtest.NewEmbedder(16)
	srv := newServer(t, llmtest.NewScript(), llmtest.WithEmbedder(emb))
	want := embed(t, emb, "first text", "second text")

	resp := postEmbeddings(t, srv, `{"model":"text-embedding-3-small","input":["first text","second text"]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := decode[embeddingsReply](t, resp)
	if r.Object != "list" || r.Model != "text-embedding-3-small" || len(r.Data) != 2 || r.Usage.PromptTokens == 0 || r.Usage.TotalTokens != r.Usage.PromptTokens {
		t.Fatalf("reply %+v", r)
	}
	for i, d := range r.Data {
		var v []float32
		if err := json.Unmarshal(d.Embedding, &v); err != nil {
			t.Fatal(err)
		}
		if d.Object != "embedding" || d.Index != i || !slices.Equal(v, want[i]) {
			t.Errorf("data[%d] = %+v, want index %d and %v", i, d, i, want[i])
		}
	}

	// A string input, base64, shortened vectors.
	resp = postEmbeddings(t, srv, `{"model":"m","input":"first text","encoding_format":"base64","dimensions":4}`)
	r = decode[embeddingsReply](t, resp)
	if resp.StatusCode != 200 || len(r.Data) != 1 {
		t.Fatalf("status %d, reply %+v", resp.StatusCode, r)
	}
	var s string
	if err := json.Unmarshal(r.Data[0].Embedding, &s); err != nil {
		t.Fatalf("base64 embedding %s: %v", r.Data[0].Embedding, err)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		t.Fatalf("base64 %q: %d bytes, %v", s, len(b), err)
	}
	short := make([]float32, 4)
	for i := range short {
		short[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	var n float64
	for _, x := range short {
		n += float64(x) * float64(x)
	}
	if math.Abs(n-1) > 1e-5 && n != 0 {
		t.Errorf("shortened vector %v has squared length %v, want 1", short, n)
	}
	if c := cosine(short, want[0][:4]); n != 0 && c < 0.999 {
		t.Errorf("shortened vector %v is not the start of %v", short, want[0])
	}

	reqs := srv.Requests()
	if len(reqs) != 2 || !slices.Equal(reqs[0].Inputs, []string{"first text", "second text"}) || !slices.Equal(reqs[1].Inputs, []string{"first text"}) || reqs[0].Status != 200 {
		t.Errorf("requests %+v", reqs)
	}
}

func TestServerEmbeddingsInvalid(t *testing.T) {
	srv := newServer(t, llmtest.NewScript(), llmtest.WithEmbedder(llmtest.NewEmbedder(4)))
	many, _ := json.Marshal(slices.Repeat([]string{"x"}, 2049))
	for _, body := range []string{
		`{"model":"m","input":`,
		`{"input":["a"]}`,
		`{"model":"m"}`,
		`{"model":"m","input":[]}`,
		`{"model":"m","input":["a",""]}`,
		`{"model":"m","input":[[1,2,3]]}`,
		`{"model":"m","input":` + string(many) + `}`,
		`{"model":"m","input":"a","encoding_format":"int8"}`,
		`{"model":"m","input":"a","dimensions":0}`,
		`{"model":"m","input":"a","dimensions":5}`, // longer than the vectors
	} {
		resp := postEmbeddings(t, srv, body)
		e := decode[apiErr](t, resp)
		if resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
			if len(body) > 80 {
				body = body[:80] + "..."
			}
			t.Errorf("%s: status %d, error %+v; want 400 invalid_request_error", body, resp.StatusCode, e.Error)
		}
	}
}

func TestServerEmbeddingsFailures(t *testing.T) {
	emb := llmtest.NewEmbedder(4)
	srv := newServer(t, llmtest.NewScript(), llmtest.WithEmbedder(emb), llmtest.WithAPIKey("sk-emb"))
	body := `{"model":"m","input":"a text"}`
	if resp := postEmbeddings(t, srv, body); resp.StatusCode != 401 {
		t.Errorf("without the key: status %d, want 401", resp.StatusCode)
	}

	srv2 := newServer(t, llmtest.NewScript(), llmtest.WithEmbedder(emb))
	srv2.Inject(llmtest.RateLimited(2 * time.Second))
	resp := postEmbeddings(t, srv2, body)
	if resp.StatusCode != 429 || resp.Header.Get("retry-after") != "2" {
		t.Errorf("injected 429: status %d, retry-after %q", resp.StatusCode, resp.Header.Get("retry-after"))
	}
	if srv2.PendingFaults() != 0 {
		t.Error("the fault was not taken by the embeddings request")
	}
	emb.Fail(&llm.Error{Kind: llm.KindUnavailable, Message: "embedder down"})
	if resp := postEmbeddings(t, srv2, body); resp.StatusCode != 503 {
		t.Errorf("embedder failing: status %d, want 503", resp.StatusCode)
	}
	emb.Fail(nil)
	if resp := postEmbeddings(t, srv2, body); resp.StatusCode != 200 {
		t.Errorf("embedder back: status %d", resp.StatusCode)
	}
	// A GET, or another path, is still a 404.
	r, err := srv2.Client().Get(srv2.URL + "/embeddings")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 404 {
		t.Errorf("GET /embeddings: status %d, want 404", r.StatusCode)
	}
}
