package agent

// toolStackBytes is the stack a tool-call goroutine gets up front. A new
// goroutine starts with a small stack that the runtime doubles, copying it,
// whenever a call runs out of room; argument validation and JSON decoding
// reach deep enough to trigger that two or three times, each copy walking
// every frame. Growing once at the start, while the stack is one frame
// deep, is much cheaper: without it one conversation of BenchmarkConversation
// runs 1.9× the instructions (callgrind, GOMAXPROCS=1: 807k against 421k per
// conversation, 40% of them in runtime.copystack).
//
// It does not change the stack the runtime starts other goroutines with:
// adaptive stack start averages the stack in use when a collection scans
// it, not the stack allocated, and a tool goroutine is one frame past
// growStack by then. BenchmarkScale measured the same host-start-B and
// stack-B/conv with and without it; what it costs is the peak stack while
// calls run (peak-stack-B/conv 13.6 KB per conversation against 9.3 KB,
// N=2000), which tools that go as deep as JSON decoding reach anyway.
const toolStackBytes = 8 << 10

// growStack makes the current goroutine's stack at least toolStackBytes
// deep: its frame holds an array that large, so its prologue grows the
// stack to fit the frame. The array is only declared in a branch that
// runs for a negative i, which callers never pass (a call's index), so it
// is never zeroed: zeroing it wrote 7 KB into the fresh stack of every
// tool goroutine, with the cache misses that brings. The compiler cannot
// know i, so it keeps the array and the frame.
//
//go:noinline
func growStack(i int) byte {
	if i >= 0 {
		return 0
	}
	var buf [toolStackBytes - 1024]byte
	buf[-i%len(buf)] = byte(i)
	return buf[(-i+1)%len(buf)]
}

// boundStackBytes is the stack a tool-call goroutine gets up front when its
// arguments were decoded on the loop's goroutine (tool.Bound): what stays
// on it is the tool's own frames and about 1.1 KB of valet's (execBound,
// Bound.Run, the retry loop, the panic guard). A goroutine started at 2 KB
// would outgrow that inside the tool, copying every frame of the chain;
// growing to 4 KB while one frame deep costs a copy of one frame, and a
// goroutine the runtime already starts at 4 KB does not grow at all.
// BenchmarkScale: a parked tool goroutine keeps 4 KB, not the 8 KB of
// toolStackBytes.
const boundStackBytes = 4 << 10

// growBoundStack makes the current goroutine's stack at least
// boundStackBytes deep (a 2 KB frame does not fit a 2 KB stack, fits a
// 4 KB one).
//
//go:noinline
func growBoundStack(i int) byte {
	var buf [boundStackBytes / 2]byte
	buf[i%len(buf)] = byte(i)
	return buf[(i+1)%len(buf)]
}
