package agent

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
)

// Defaults of the doom-loop detector's fields of [LoopConfig].
const (
	DefaultDoomWindow           = 10
	DefaultDoomRepeats          = 3
	DefaultDoomFailures         = 5
	DefaultDoomMaxInterventions = 3
)

// doomDefaults applies the doom-loop detector's defaults and checks them
// (negative values are refused with the others, in withDefaults).
func (c *LoopConfig) doomDefaults() error {
	for _, f := range []struct {
		v *int
		d int
	}{{&c.DoomWindow, DefaultDoomWindow}, {&c.DoomRepeats, DefaultDoomRepeats}, {&c.DoomFailures, DefaultDoomFailures}, {&c.DoomMaxInterventions, DefaultDoomMaxInterventions}} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	if !c.NoDoomLoop && (c.DoomRepeats < 2 || c.DoomRepeats > c.DoomWindow) {
		return fmt.Errorf("%w: LoopConfig.DoomRepeats %d: want 2 to DoomWindow (%d)", ErrInvalidConfig, c.DoomRepeats, c.DoomWindow)
	}
	return nil
}

// doomState is a run's doom-loop detector: the signatures of its latest
// tool calls and its failures in a row. It allocates nothing for a
// DoomWindow of up to 16 calls.
type doomState struct {
	sigs  []uint64 // a ring of the latest calls' signatures (len DoomWindow)
	small [16]uint64
	next  int // the slot of the next call
	n     int // the slots filled: sigs[:n]
	fails int // failing calls in a row
	times int // interventions so far
}

// add records a call's signature and returns how many of the latest
// window calls have it.
func (d *doomState) add(sig uint64, window int) int {
	if d.sigs == nil {
		if window <= len(d.small) {
			d.sigs = d.small[:window]
		} else {
			d.sigs = make([]uint64, window)
		}
	}
	d.sigs[d.next] = sig
	d.next = (d.next + 1) % len(d.sigs)
	d.n = min(d.n+1, len(d.sigs))
	k := 0
	for _, s := range d.sigs[:d.n] {
		if s == sig {
			k++
		}
	}
	return k
}

// reset starts the detection afresh (after an intervention).
func (d *doomState) reset() { d.next, d.n, d.fails = 0, 0, 0 }

// watchDoom looks at the calls of a turn (recorded from
// Result.ToolCalls[base]) for a loop: the same call DoomRepeats times
// among the latest DoomWindow, or DoomFailures failures in a row. Found,
// it adds a note for the model, or after DoomMaxInterventions stops the
// run with ErrDoomLoop and a last answer without tools.
func (r *run) watchDoom(calls []llm.ToolCall, base int) error {
	loop := &r.o.loop
	d := &r.doom
	repeated, window := -1, 0 // the call repeated DoomRepeats times, and the calls looked at then
	failing := false
	for i, c := range calls {
		rec := &r.res.ToolCalls[base+i]
		if rec.ResultStatus == resultBudgetSpent || rec.ResultStatus == resultInterrupted {
			continue // not the model's doing
		}
		if d.add(callSignature(c), loop.DoomWindow) >= loop.DoomRepeats && repeated < 0 {
			repeated, window = i, d.n
		}
		if rec.Success {
			d.fails = 0
		} else if d.fails++; d.fails >= loop.DoomFailures {
			failing = true
		}
	}
	var why string
	switch {
	case repeated >= 0:
		why = fmt.Sprintf("you called %s with the same arguments %d times in your last %d tool calls",
			doomName(calls[repeated].Name), loop.DoomRepeats, window)
	case failing && d.fails > 0:
		why = fmt.Sprintf("your last %d tool calls failed", d.fails)
	case failing:
		why = fmt.Sprintf("%d tool calls in a row failed", loop.DoomFailures)
	default:
		return nil
	}
	d.times++
	d.reset()
	stop := d.times >= loop.DoomMaxInterventions
	var note string
	switch {
	case stop:
		note = fmt.Sprintf(doomStopNote, why, d.times-1)
	case d.times == 1:
		note = fmt.Sprintf(doomFirstNote, why)
	default:
		note = fmt.Sprintf(doomAgainNote, why)
	}
	if r.o.obs != nil {
		r.step(Step{Kind: StepDoomLoop, Text: note, Count: d.times})
	}
	if r.tel != nil && r.tel.span != nil {
		r.tel.span.AddEvent("valet.doom_loop", trace.WithAttributes(
			attribute.Int("valet.doom_loop.intervention", d.times),
			attribute.Bool("valet.doom_loop.stopped", stop),
		))
	}
	r.log().WarnContext(r.ctx, "agent: the run is going round in circles", "intervention", d.times, "stopped", stop)
	if !stop {
		r.addNote(note)
		return nil
	}
	if err := r.lastCall(note, false); err != nil {
		r.res.Response = lastWritten(r.window)
		return fmt.Errorf("%w; the last call for an answer failed: %w", ErrDoomLoop, err)
	}
	return ErrDoomLoop
}

// The notes of the doom-loop detector; %s is why it intervenes.
const (
	doomFirstNote = "Note: %s. Doing again what did not work will not work now. Stop and reconsider: " +
		"use the results you already have, try a different approach, or answer the user and say what is in the way."
	doomAgainNote = "Warning: %s, again, after a note asking you to reconsider. Do not make that call again. " +
		"Change your approach now or answer the user with what you have: if this goes on, the request will be stopped."
	doomStopNote = "This request is being stopped: %s, after %d notes asking you to change course. Do not call tools. " +
		"Answer the user now with what you found so far, and say plainly what you could not do and why."
)

// doomName is a tool name the model wrote, quoted on one line for a note.
func doomName(name string) string {
	return strconv.Quote(textsafe.Line(cut(name, 64)))
}

// lastWritten is the text of the last assistant message of msgs that has
// some: what the model last wrote.
func lastWritten(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := &msgs[i]; m.Role == llm.RoleAssistant && m.Content != "" {
			return m.Content
		}
	}
	return ""
}

// callSignature identifies a call by its name and its arguments as JSON
// values: key order, spacing and spelling do not change it (argsHash).
func callSignature(c llm.ToolCall) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(c.Name); i++ {
		h = (h ^ uint64(c.Name[i])) * fnvPrime
	}
	return mix64(h ^ mix64(argsHash(c.Arguments)+0x9e3779b97f4a7c15))
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// mix64 is splitmix64's finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// argsHash hashes JSON text as the value it encodes, up to key order and
// whitespace and spelling: the members of an object are combined in any
// order, arrays in order, strings as the text they encode (escapes
// decoded), numbers by their float64 value (2, 2.0 and 2e0 are one),
// true, false and null as written. Empty text hashes as {}; text that is
// not JSON hashes as its bytes. It allocates nothing.
func argsHash(b []byte) uint64 {
	b = skipSpace(b)
	if len(b) == 0 {
		b = []byte("{}")
	}
	h, rest, ok := hashJSON(b, 0)
	if ok && len(skipSpace(rest)) == 0 {
		return h
	}
	return mix64(fnvBytes(fnvOffset^'!', b))
}

func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// maxJSONDepth bounds argsHash's recursion; deeper text hashes as bytes.
const maxJSONDepth = 64

// hashJSON hashes the value at the start of b and returns the rest.
func hashJSON(b []byte, depth int) (uint64, []byte, bool) {
	b = skipSpace(b)
	if len(b) == 0 || depth > maxJSONDepth {
		return 0, nil, false
	}
	switch b[0] {
	case '{':
		var sum uint64
		b = skipSpace(b[1:])
		if len(b) > 0 && b[0] == '}' {
			return mix64('o'), b[1:], true
		}
		for {
			b = skipSpace(b)
			if len(b) == 0 || b[0] != '"' {
				return 0, nil, false
			}
			kh, rest, ok := hashString(b)
			if !ok {
				return 0, nil, false
			}
			b = skipSpace(rest)
			if len(b) == 0 || b[0] != ':' {
				return 0, nil, false
			}
			vh, rest, ok := hashJSON(b[1:], depth+1)
			if !ok {
				return 0, nil, false
			}
			sum += mix64(kh*fnvPrime ^ vh) // order-independent
			b = skipSpace(rest)
			switch {
			case len(b) > 0 && b[0] == ',':
				b = b[1:]
			case len(b) > 0 && b[0] == '}':
				return mix64(sum ^ 'o'), b[1:], true
			default:
				return 0, nil, false
			}
		}
	case '[':
		h := uint64(fnvOffset ^ 'a')
		b = skipSpace(b[1:])
		if len(b) > 0 && b[0] == ']' {
			return mix64(h), b[1:], true
		}
		for {
			vh, rest, ok := hashJSON(b, depth+1)
			if !ok {
				return 0, nil, false
			}
			h = mix64(h*fnvPrime ^ vh) // in order
			b = skipSpace(rest)
			switch {
			case len(b) > 0 && b[0] == ',':
				b = b[1:]
			case len(b) > 0 && b[0] == ']':
				return h, b[1:], true
			default:
				return 0, nil, false
			}
		}
	case '"':
		return hashString(b)
	}
	// A number, true, false or null: up to the next delimiter.
	i := 0
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	if i == 0 {
		return 0, nil, false
	}
	if c := b[0]; c == '-' || c >= '0' && c <= '9' {
		// A number by its value: 2, 2.0 and 2e0 are one.
		f, err := strconv.ParseFloat(string(b[:i]), 64)
		if err != nil {
			return 0, nil, false
		}
		if f == 0 {
			f = 0 // -0 is 0
		}
		return mix64(math.Float64bits(f) ^ 'n'*fnvPrime), b[i:], true
	}
	return mix64(fnvBytes(fnvOffset^'l', b[:i])), b[i:], true
}

// hashString hashes the string at the start of b (b[0] is '"') as the
// text it encodes: escapes decoded ("\u0061" and "a" are one), a lone
// surrogate as U+FFFD (as encoding/json reads it). A bad escape or a
// control character is not JSON (false).
func hashString(b []byte) (uint64, []byte, bool) {
	h := uint64(fnvOffset ^ 's')
	var buf [utf8.UTFMax]byte
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			return mix64(h), b[i+1:], true
		case c < 0x20:
			return 0, nil, false
		case c != '\\':
			h = (h ^ uint64(c)) * fnvPrime
			continue
		}
		i++
		if i >= len(b) {
			return 0, nil, false
		}
		switch b[i] {
		case '"', '\\', '/':
			c = b[i]
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'u':
			r, ok := hex4(b[i+1:])
			if !ok {
				return 0, nil, false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+2 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					r2, ok = hex4(b[i+3:])
					if !ok {
						return 0, nil, false
					}
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			h = fnvBytes(h, buf[:utf8.EncodeRune(buf[:], r)])
			continue
		default:
			return 0, nil, false
		}
		h = (h ^ uint64(c)) * fnvPrime
	}
	return 0, nil, false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
