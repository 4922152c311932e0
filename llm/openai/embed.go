package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/valetkit/valet/llm"
)

// DefaultEmbeddingModel is the model [Client.Embed] asks for when
// [Config.EmbeddingModel] is empty.
const DefaultEmbeddingModel = "text-embedding-3-small"

// MaxEmbeddingInputs is the most texts OpenAI accepts in one embeddings
// request, and the largest [Config.EmbeddingBatchSize].
const MaxEmbeddingInputs = 2048

// DefaultEmbeddingBatchSize is how many texts one embeddings request
// carries when [Config.EmbeddingBatchSize] is zero: 64. Vectors come back
// as JSON numbers, which OpenAI prints one per line, about 23 bytes each:
// 64 vectors of 4,096 dimensions (more than text-embedding-3-large's
// 3,072) are some 6 MiB, within DefaultMaxResponseBytes. Raise both to
// send fewer, larger requests.
const DefaultEmbeddingBatchSize = 64

// EmbeddingModel returns the model Embed asks for.
func (c *Client) EmbeddingModel() string { return c.embModel }

// Embed returns one vector per text, in order, from POST
// {BaseURL}/embeddings; it implements [llm.Embedder]. Texts are sent
// [Config.EmbeddingBatchSize] at a time, one request after the other, and
// all must succeed: the first failure is returned and nothing else. An
// empty texts gives nil, nil without a request.
//
// Failures are *llm.Error values classified like those of Complete (see
// the package documentation), with the same redaction of credentials and
// the same [Config.MaxResponseBytes] cap on each reply. A reply that does
// not answer the texts — another number of vectors, an index out of
// range or repeated, vectors of different lengths, across requests too —
// fails with kind llm.KindUnknown (not retried), and errors.Is(err,
// llm.ErrInvalidEmbeddings) holds. Like Complete, Embed does not retry.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += c.embBatch {
		vecs, err := c.embedBatch(ctx, texts[start:min(start+c.embBatch, len(texts))])
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	if err := llm.CheckEmbeddings(len(texts), out); err != nil {
		return nil, c.classify(ctx, failure{err: fmt.Errorf("openai: embeddings: %w", err)})
	}
	return out, nil
}

// embedBatch sends one embeddings request and returns its vectors in the
// order of texts.
func (c *Client) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	params := oa.EmbeddingNewParams{
		Input:          oa.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		Model:          c.embModel,
		EncodingFormat: oa.EmbeddingNewParamsEncodingFormatFloat,
	}
	if c.embDims > 0 {
		params.Dimensions = param.NewOpt(int64(c.embDims))
	}
	var raw *http.Response
	_, err := c.emb.New(ctx, params, option.WithResponseBodyInto(&raw), option.WithMiddleware(c.capErrorBody))
	res, err := c.answer(ctx, raw, err)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := c.readBody(res.Body)
	if err != nil {
		return nil, c.classify(ctx, failure{err: err})
	}
	var w wireEmbeddings
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, c.classify(ctx, failure{status: res.StatusCode, header: res.Header, body: body,
			err: fmt.Errorf("openai: decoding embeddings: %w", err), malformed: true})
	}
	if e := bytes.TrimSpace(w.Error); len(e) > 0 && !bytes.Equal(e, []byte("null")) {
		return nil, c.classify(ctx, failure{body: body, inline: true})
	}
	vecs, err := w.vectors(len(texts))
	if err != nil {
		if errors.Is(err, llm.ErrInvalidEmbeddings) {
			return nil, c.classify(ctx, failure{err: fmt.Errorf("openai: embeddings: %w", err)})
		}
		return nil, c.classify(ctx, failure{status: res.StatusCode, header: res.Header, body: body,
			err: fmt.Errorf("openai: decoding embeddings: %w", err), malformed: true})
	}
	return vecs, nil
}

// wireEmbeddings is an embeddings reply: {"object":"list","data":[...],
// "model":...,"usage":{...}}, or an error sent with a 200.
type wireEmbeddings struct {
	Data  []wireEmbedding `json:"data"`
	Error json.RawMessage `json:"error"`
}

// wireEmbedding is one vector: "embedding" is an array of numbers, or a
// base64 string of little-endian float32s (encoding_format "base64",
// which some servers send whatever was asked). A missing "index" is the
// entry's position.
type wireEmbedding struct {
	Index     *int            `json:"index"`
	Embedding json.RawMessage `json:"embedding"`
}

// vectors returns the reply's vectors ordered by index, checking that
// they are exactly one per text. A wrong count or index is
// llm.ErrInvalidEmbeddings; a vector that does not decode is another
// error.
func (w *wireEmbeddings) vectors(n int) ([][]float32, error) {
	if len(w.Data) != n {
		return nil, fmt.Errorf("%w: %d vectors for %d texts", llm.ErrInvalidEmbeddings, len(w.Data), n)
	}
	out := make([][]float32, n)
	for i, d := range w.Data {
		idx := i
		if d.Index != nil {
			idx = *d.Index
		}
		if idx < 0 || idx >= n {
			return nil, fmt.Errorf("%w: index %d out of range for %d texts", llm.ErrInvalidEmbeddings, idx, n)
		}
		if out[idx] != nil {
			return nil, fmt.Errorf("%w: index %d repeated", llm.ErrInvalidEmbeddings, idx)
		}
		v, err := decodeVector(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("vector %d: %w", idx, err)
		}
		if len(v) == 0 {
			return nil, fmt.Errorf("%w: vector %d is empty", llm.ErrInvalidEmbeddings, idx)
		}
		out[idx] = v
	}
	return out, nil
}

// decodeVector reads a JSON array of numbers or a base64 string of
// little-endian float32s.
func decodeVector(raw json.RawMessage) ([]float32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("base64 vector: %w", err)
		}
		if len(b)%4 != 0 {
			return nil, fmt.Errorf("base64 vector of %d bytes, not a whole number of float32s", len(b))
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}
