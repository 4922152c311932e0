package pgmemory

import "github.com/valetkit/valet/memory/internal/msgjson"

// EncodeMessage is how a message is stored, for the baseline of the benchmarks.
var EncodeMessage = msgjson.Encode
