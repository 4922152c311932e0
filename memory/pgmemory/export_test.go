package pgmemory

// EncodeMessage is encodeMessage, for the baseline of the benchmarks.
var EncodeMessage = encodeMessage
