package agent

// toolStackBytes is the stack a tool-call goroutine gets up front. A new
// goroutine starts with a small stack that the runtime doubles, copying it,
// whenever a call runs out of room; argument validation and JSON decoding
// reach deep enough to trigger that two or three times, each copy walking
// every frame. Growing once at the start, while the stack is one frame
// deep, is much cheaper (see BenchmarkConversation).
const toolStackBytes = 8 << 10

// growStack makes the current goroutine's stack at least toolStackBytes
// deep. The array must live on the stack, so it is indexed with a value the
// compiler cannot know.
//
//go:noinline
func growStack(i int) byte {
	var buf [toolStackBytes - 1024]byte
	buf[i%len(buf)] = byte(i)
	return buf[(i+1)%len(buf)]
}
