package llmtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"unicode/utf8"

	"github.com/valetkit/valet/llm"
)

// maxEmbeddingInputs is the most texts OpenAI takes in one embeddings
// request.
const maxEmbeddingInputs = 2048

// WithEmbedder sets the embedder that answers POST {URL}/embeddings.
// By default it is NewEmbedder(0), a new one per server.
func WithEmbedder(e llm.Embedder) ServerOption {
	return func(o *serverOptions) { o.embedder = e }
}

// embeddingsRequest is a decoded embeddings request.
type embeddingsRequest struct {
	model      string
	inputs     []string
	base64     bool
	dimensions int // 0: not given
}

const invalidInputMessage = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."

// decodeEmbeddingsRequest decodes and validates an embeddings request
// body; like decodeRequest, it returns what it could decode with an error.
func decodeEmbeddingsRequest(body []byte) (embeddingsRequest, *apiError) {
	var d embeddingsRequest
	var w struct {
		Model          *string         `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat *string         `json:"encoding_format"`
		Dimensions     *int            `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return d, invalid("", "", invalidJSONMessage)
	}
	if w.Model != nil {
		d.model = *w.Model
	}
	input := bytes.TrimSpace(w.Input)
	var inputErr *apiError
	switch {
	case len(input) == 0 || bytes.Equal(input, []byte("null")):
		inputErr = invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	case input[0] == '"':
		var s string
		if json.Unmarshal(input, &s) != nil {
			inputErr = invalid("input", "", invalidInputMessage)
		}
		d.inputs = []string{s}
	default:
		if json.Unmarshal(input, &d.inputs) != nil {
			// Token arrays are valid for OpenAI but have no text to embed.
			inputErr = invalid("input", "", "llmtest: input must be a string or an array of strings (token arrays are not supported)")
		}
	}
	switch {
	case d.model == "":
		return d, invalid("", "", "you must provide a model parameter")
	case inputErr != nil:
		return d, inputErr
	case len(d.inputs) == 0:
		return d, invalid("input", "", invalidInputMessage)
	case len(d.inputs) > maxEmbeddingInputs:
		return d, invalid("input", "", fmt.Sprintf("'$.input' is too long: %d inputs, at most %d.", len(d.inputs), maxEmbeddingInputs))
	}
	for _, s := range d.inputs {
		if s == "" {
			return d, invalid("input", "", invalidInputMessage)
		}
	}
	if w.EncodingFormat != nil {
		switch *w.EncodingFormat {
		case "float":
		case "base64":
			d.base64 = true
		default:
			return d, invalid("encoding_format", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'float' and 'base64'.", *w.EncodingFormat))
		}
	}
	if w.Dimensions != nil {
		if *w.Dimensions < 1 {
			return d, invalid("dimensions", "integer_below_min_value", fmt.Sprintf("Invalid 'dimensions': integer below minimum value. Expected a value >= 1, but got %d instead.", *w.Dimensions))
		}
		d.dimensions = *w.Dimensions
	}
	return d, nil
}

// serveEmbeddings answers a valid embeddings request with the embedder's
// vectors, in OpenAI's wire format, exactly as the embedder returned them
// (so a test can feed a client a bad reply). With "dimensions", each
// vector is cut to that length and scaled back to length 1, as OpenAI
// does; a vector shorter than that is a 400.
func (h *Handler) serveEmbeddings(ctx context.Context, w http.ResponseWriter, idx int, d embeddingsRequest, f Fault) {
	vecs, err := h.embedder.Embed(ctx, d.inputs)
	if ctx.Err() != nil {
		h.log.abandon(w, idx)
		return
	}
	if err != nil {
		h.writeError(w, idx, modelError(err))
		return
	}
	if f.Drop {
		abort(w)
		return
	}
	out := wireEmbeddings{Object: "list", Model: d.model, Data: make([]wireEmbedding, len(vecs))}
	for i, v := range vecs {
		if d.dimensions > 0 {
			if len(v) < d.dimensions {
				h.writeError(w, idx, invalid("dimensions", "", fmt.Sprintf("This model does not support %d dimensions (its vectors have %d).", d.dimensions, len(v))))
				return
			}
			v = shorten(v, d.dimensions)
		}
		e := wireEmbedding{Object: "embedding", Index: i}
		if d.base64 {
			e.Embedding = jsonString(encodeVector(v))
		} else {
			b, err := json.Marshal(v)
			if err != nil { // NaN or an infinity: not JSON
				h.writeError(w, idx, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "llmtest: the embedder returned a vector JSON cannot hold: " + err.Error()})
				return
			}
			e.Embedding = b
		}
		out.Data[i] = e
	}
	for _, s := range d.inputs {
		n := (utf8.RuneCountInString(s) + 3) / 4
		out.Usage.PromptTokens += n
		out.Usage.TotalTokens += n
	}
	h.writeJSON(w, idx, http.StatusOK, out)
}

// shorten returns the first n values of v scaled to length 1.
func shorten(v []float32, n int) []float32 {
	out := make([]float32, n)
	copy(out, v)
	normalize(out)
	return out
}

// encodeVector is OpenAI's encoding_format "base64": little-endian
// float32s.
func encodeVector(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// The OpenAI embeddings wire format, response side.

type wireEmbeddings struct {
	Object string          `json:"object"`
	Data   []wireEmbedding `json:"data"`
	Model  string          `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

type wireEmbedding struct {
	Object    string          `json:"object"`
	Index     int             `json:"index"`
	Embedding json.RawMessage `json:"embedding"` // an array of numbers, or a base64 string
}
