package pgmemory

import (
	"math"
	"testing"
)

// TestVectorEncoding: a vector reads back from embedding_f32 bit for bit,
// NaN, infinities and negative zero included; nil stays NULL; bytes that
// are not whole float32s read as no vector.
func TestVectorEncoding(t *testing.T) {
	v := []float32{0, float32(math.Copysign(0, -1)), 1.5, -3.25e-7, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32}
	got := decodeVector(encodeVector(v))
	if len(got) != len(v) {
		t.Fatalf("decodeVector(encodeVector(%v)) = %v", v, got)
	}
	for i := range v {
		if math.Float32bits(got[i]) != math.Float32bits(v[i]) {
			t.Errorf("element %d: %v (%#x), want %v (%#x)", i, got[i], math.Float32bits(got[i]), v[i], math.Float32bits(v[i]))
		}
	}
	if b := encodeVector(nil); b != nil {
		t.Errorf("encodeVector(nil) = %v, want nil (NULL)", b)
	}
	if got := decodeVector([]byte{1, 2, 3, 4, 5}); got != nil {
		t.Errorf("decodeVector of 5 bytes = %v, want nil", got)
	}
}
