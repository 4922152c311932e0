package llmtest

import (
	"context"
	"net/http"
	"sync"
)

// exchanges is what a fake server ([Handler], [AnthropicServer]) keeps of
// its exchanges: the faults queued for the next requests, every request
// received with the status it was answered with, and the count that
// numbers the request ids. It is safe for concurrent use.
type exchanges struct {
	mu       sync.Mutex
	faults   []Fault
	requests []ServerRequest
	seq      int
}

// inject queues faults for the next requests.
func (x *exchanges) inject(faults []Fault) {
	x.mu.Lock()
	x.faults = append(x.faults, faults...)
	x.mu.Unlock()
}

// pendingFaults returns how many queued faults no request has taken yet.
func (x *exchanges) pendingFaults() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.faults)
}

// nextFault takes the next queued fault, or returns the zero Fault.
func (x *exchanges) nextFault() Fault {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.faults) == 0 {
		return Fault{}
	}
	f := x.faults[0]
	x.faults = x.faults[1:]
	return f
}

// all returns a copy of every request recorded so far, in arrival order.
func (x *exchanges) all() []ServerRequest {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]ServerRequest, len(x.requests))
	copy(out, x.requests)
	return out
}

// nextSeq returns the number of the next request, from 1.
func (x *exchanges) nextSeq() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	return x.seq
}

// record appends r and returns its index, for setStatus.
func (x *exchanges) record(r ServerRequest) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.requests = append(x.requests, r)
	return len(x.requests) - 1
}

// setStatus records the status request idx was answered with.
func (x *exchanges) setStatus(idx, status int) {
	x.mu.Lock()
	x.requests[idx].Status = status
	x.mu.Unlock()
}

// writeRawFault answers request idx with f's Body as it is (see
// [Fault].Body).
func (x *exchanges) writeRawFault(w http.ResponseWriter, idx int, f Fault) {
	writeRawBody(w, f)
	x.setStatus(idx, f.Status)
}

// writeSSE answers request idx 200 with the n server-sent events frame
// returns, each flushed as it is written, and cuts the connection after
// f.DropAfter of them when f.Drop (or when frame fails). It reports
// whether every event was sent and the stream may be ended normally; it
// stops early, reporting false, when a write or flush fails or ctx ends.
func (x *exchanges) writeSSE(ctx context.Context, w http.ResponseWriter, idx int, f Fault, n int, frame func(i int) ([]byte, error)) bool {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	x.setStatus(idx, http.StatusOK)
	_ = rc.Flush()
	for i := range n {
		if f.Drop && i >= f.DropAfter {
			abort(w)
			return false
		}
		b, err := frame(i)
		if err != nil {
			abort(w)
			return false
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		if rc.Flush() != nil || ctx.Err() != nil {
			return false
		}
	}
	if f.Drop {
		abort(w)
		return false
	}
	return true
}

// abandon records that request idx was given up, its client gone or the
// server closed ([StatusClientClosedRequest]), and cuts the connection.
func (x *exchanges) abandon(w http.ResponseWriter, idx int) {
	x.setStatus(idx, StatusClientClosedRequest)
	abort(w)
}
