// Package keyring rotates the API keys of a model client: a call uses the
// first key that is not cooling down, and a key that failed for quota, rate
// limit or auth is cooled down for a while. It never prints a key: a Ring
// has no String method and its errors name keys by their place only.
package keyring

import (
	"strconv"
	"sync"
	"time"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/llm"
)

// DefaultCooldown is how long a failed key rests when the client's
// configuration sets no cool-down.
const DefaultCooldown = time.Minute

// Ring is a set of keys in order. It is safe for concurrent use.
type Ring struct {
	keys     []string
	cooldown time.Duration
	clk      clock.Clock

	mu    sync.Mutex
	until []time.Time // per key: cooling down until then
}

// New returns a ring over keys (empty keys dropped, duplicates once).
// A zero cooldown is DefaultCooldown; a nil clock is clock.System.
func New(keys []string, cooldown time.Duration, clk clock.Clock) *Ring {
	r := &Ring{cooldown: cooldown, clk: clock.Or(clk)}
	if r.cooldown <= 0 {
		r.cooldown = DefaultCooldown
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if k != "" && !seen[k] && len(r.keys) < 64 {
			seen[k] = true
			r.keys = append(r.keys, k)
		}
	}
	r.until = make([]time.Time, len(r.keys))
	return r
}

// Len is the number of keys.
func (r *Ring) Len() int { return len(r.keys) }

// Pick returns the first key not cooling down and not in tried, with its
// place; when every untried key cools down, the one whose cool-down ends
// first. ok is false when every key was tried.
func (r *Ring) Pick(tried uint64) (i int, key string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clk.Now()
	best := -1
	for j := range r.keys {
		if tried&(1<<j) != 0 {
			continue
		}
		if !now.Before(r.until[j]) {
			return j, r.keys[j], true
		}
		if best < 0 || r.until[j].Before(r.until[best]) {
			best = j
		}
	}
	if best < 0 {
		return 0, "", false
	}
	return best, r.keys[best], true
}

// Fail cools key i down.
func (r *Ring) Fail(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.until[i] = r.clk.Now().Add(r.cooldown)
}

// Redacted describes keys without showing any: "[]" for none, else
// "[N REDACTED]".
func Redacted(keys []string) string {
	if len(keys) == 0 {
		return "[]"
	}
	return "[" + strconv.Itoa(len(keys)) + " REDACTED]"
}

// Field is ", APIKeys: " and Redacted(keys) for a Config's String, or ""
// when there are no keys.
func Field(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return ", APIKeys: " + Redacted(keys)
}

// Send calls send with each key in turn (Pick) until one is not refused
// for quota, rate limit or auth; a refused key is cooled down (Fail). The
// last refusal is returned when every key was refused.
func Send[T any](r *Ring, send func(key string) (T, error)) (T, error) {
	var tried uint64
	for {
		i, key, ok := r.Pick(tried)
		if !ok {
			var zero T
			return zero, errNoKey
		}
		res, err := send(key)
		switch llm.KindOf(err) {
		case llm.KindRateLimited, llm.KindAuth:
			r.Fail(i)
			tried |= 1 << i
			if _, _, more := r.Pick(tried); more {
				continue
			}
		}
		return res, err
	}
}

var errNoKey = &llm.Error{Kind: llm.KindAuth, Message: "no API key"}

// Of returns the ring of a client's APIKey and APIKeys, or nil when there
// are fewer than two distinct keys (nothing to rotate).
func Of(key string, more []string, cooldown time.Duration, clk clock.Clock) *Ring {
	r := New(append([]string{key}, more...), cooldown, clk)
	if r.Len() < 2 {
		return nil
	}
	return r
}
