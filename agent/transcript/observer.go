package transcript

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/valetkit/valet/agent"
)

// Defaults of Config.
const (
	// DefaultBuffer is Config.Buffer's default: 8 MiB of lines.
	DefaultBuffer = 8 << 20
	// DefaultMaxText is Config.MaxText's default: 64 KiB.
	DefaultMaxText = 64 << 10
)

// ErrInvalidConfig is returned by New for a Config it cannot use.
var ErrInvalidConfig = errors.New("transcript: invalid config")

// Config configures New. Exactly one of Writer and Dir is set.
type Config struct {
	// Buffer is how many bytes of lines may wait to be written. A step
	// that finds the buffer full is dropped (Observer.Dropped counts it;
	// the first drop is logged). Default DefaultBuffer.
	Buffer int
	// Dir is a directory holding one file per conversation, appended to
	// run after run, named FileName(tenant, conversation): a hash of the
	// ids, never the ids themselves. It is created (0700) when missing,
	// files 0600. A file is opened for each batch of lines and closed
	// after it, so an Observer holds no file open between batches. When
	// Dir cannot be written, the lines are lost (Observer.Failed counts
	// them), the first failure is logged, and runs go on. Default none.
	Dir string
	// FullRequests writes every message of each model request, the
	// system prompt and the history included. Default false: only the
	// messages new to the request (after its last assistant message),
	// system messages left out, and their count.
	FullRequests bool
	// Logger gets the first failure to write and the first drop. Default
	// slog.Default() at New.
	Logger *slog.Logger
	// MaxText cuts each text (a message, a tool result, a reply) to this
	// many bytes after redaction; -1 for no limit. Default DefaultMaxText.
	MaxText int
	// Writer receives every run's lines, in order; writes are not
	// concurrent. The Observer does not close it. Default none.
	Writer io.Writer
}

// Observer is an agent.Observer writing a JSONL transcript: one JSON
// object (a Record) per line, per step of every run, with every text and
// tool argument redacted (agent.RedactText, agent.RedactArguments). A
// line never holds a raw line break: CR, LF, the other control
// characters, U+0085, U+2028 and U+2029 are escaped, invalid UTF-8 is
// replaced by U+FFFD.
//
// Observe encodes the step on the run's goroutine and queues the line;
// lines are written on a goroutine of the Observer's own, which runs while
// lines wait, so a slow or stuck Writer never holds a run up: steps are
// dropped instead when Config.Buffer is full. Flush waits for queued
// lines; Close flushes and stops accepting steps.
type Observer struct {
	w      io.Writer
	dir    string
	max    int
	log    *slog.Logger
	redact redactor

	mu      sync.Mutex
	queue   []line
	queued  int // bytes in queue
	running bool
	idle    chan struct{} // closed when the running goroutine ends
	closed  bool

	dropped, failed atomic.Uint64
	warnedDrop      atomic.Bool
	warnedFail      atomic.Bool
}

// line is an encoded record and the file it goes to (Dir mode).
type line struct {
	file string
	b    []byte
}

// New returns an Observer writing to cfg.Writer or under cfg.Dir.
// Errors: ErrInvalidConfig (neither or both of Writer and Dir, a negative
// Buffer, a MaxText below -1).
func New(cfg Config) (*Observer, error) {
	switch {
	case (cfg.Writer == nil) == (cfg.Dir == ""):
		return nil, fmt.Errorf("%w: set exactly one of Writer and Dir", ErrInvalidConfig)
	case cfg.Buffer < 0:
		return nil, fmt.Errorf("%w: Buffer is negative", ErrInvalidConfig)
	case cfg.MaxText < -1:
		return nil, fmt.Errorf("%w: MaxText is below -1", ErrInvalidConfig)
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.MaxText == 0 {
		cfg.MaxText = DefaultMaxText
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Observer{w: cfg.Writer, dir: cfg.Dir, max: cfg.Buffer, log: cfg.Logger,
		redact: redactor{full: cfg.FullRequests, maxText: cfg.MaxText}}, nil
}

// FileName is the name of a conversation's file under Config.Dir: the
// first 32 hex digits of the SHA-256 of the tenant's length in bytes (in
// decimal), ":", the tenant and the conversation ("" is
// agent.DefaultConversationID), then ".jsonl". The length makes the name
// unambiguous whatever bytes the ids hold.
func FileName(tenant, conversation string) string {
	h := sha256.Sum256([]byte(strconv.Itoa(len(tenant)) + ":" + tenant + cmp.Or(conversation, agent.DefaultConversationID)))
	return hex.EncodeToString(h[:16]) + ".jsonl"
}

// Observe encodes s as a line and queues it. It never blocks on I/O.
func (o *Observer) Observe(ctx context.Context, s agent.Step) {
	b, err := o.encode(s)
	if err != nil {
		o.fail(ctx, fmt.Errorf("encoding a %s step: %w", s.Kind, err), 1)
		return
	}
	l := line{b: b}
	if o.dir != "" {
		l.file = FileName(s.TenantID, s.ConversationID)
	}
	o.mu.Lock()
	if o.closed || o.queued+len(b) > o.max && o.queued > 0 {
		o.mu.Unlock()
		o.dropped.Add(1)
		if !o.warnedDrop.Swap(true) {
			o.log.WarnContext(ctx, "transcript: the writer fell behind or the Observer is closed; steps are dropped (Observer.Dropped counts them; later drops are not logged)",
				"run_id", s.RunID, "tenant", s.TenantID, "buffer", o.max)
		}
		return
	}
	o.queue = append(o.queue, l)
	o.queued += len(b)
	if !o.running {
		o.running = true
		o.idle = make(chan struct{})
		go o.drain()
	}
	o.mu.Unlock()
}

// encode renders s as one line of JSON, ending with a line feed.
func (o *Observer) encode(s agent.Step) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false) // "?a=***&b=1" stays readable; U+2028 and U+2029 are escaped all the same
	if err := e.Encode(o.redact.record(s)); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if bytes.Contains(b, nel) { // U+0085 is a line break to some readers (Python's splitlines)
		b = bytes.ReplaceAll(b, nel, []byte(`\u0085`)) // only strings hold non-ASCII bytes
	}
	return b, nil
}

// nel is U+0085 (NEXT LINE) in UTF-8, which json leaves as it is.
var nel = []byte("\u0085")

// drain writes queued lines until none wait.
func (o *Observer) drain() {
	var batch []line
	for {
		o.mu.Lock()
		clear(batch)
		batch, o.queue = o.queue, batch[:0]
		o.queued = 0
		if len(batch) == 0 {
			o.running = false
			close(o.idle)
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		o.write(batch)
	}
}

// write writes a batch: to the Writer in one call, or to each
// conversation's file, opened for the batch.
func (o *Observer) write(batch []line) {
	if o.w != nil {
		var b []byte
		for _, l := range batch {
			b = append(b, l.b...)
		}
		if _, err := o.w.Write(b); err != nil {
			o.fail(context.Background(), err, len(batch))
		}
		return
	}
	files := make(map[string][]byte)
	var order []string
	for _, l := range batch {
		if _, ok := files[l.file]; !ok {
			order = append(order, l.file)
		}
		files[l.file] = append(files[l.file], l.b...)
	}
	for _, name := range order {
		if err := o.appendFile(name, files[name]); err != nil {
			n := bytes.Count(files[name], []byte{'\n'})
			o.fail(context.Background(), err, n)
		}
	}
}

// appendFile appends b to the file name under Dir, creating Dir (again,
// if it vanished) when it is missing.
func (o *Observer) appendFile(name string, b []byte) error {
	path := filepath.Join(o.dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(o.dir, 0o700); err == nil {
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		}
	}
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// fail counts n lines lost and logs the first failure.
func (o *Observer) fail(ctx context.Context, err error, n int) {
	o.failed.Add(uint64(n))
	if !o.warnedFail.Swap(true) {
		o.log.ErrorContext(ctx, "transcript: cannot write the transcript; lines are lost, runs go on (Observer.Failed counts them; later failures are not logged)",
			"dir", o.dir, "error", agent.RedactText(err.Error()))
	}
}

// Dropped is how many steps were dropped because the buffer was full or
// the Observer closed.
func (o *Observer) Dropped() uint64 { return o.dropped.Load() }

// Failed is how many lines could not be written (or encoded).
func (o *Observer) Failed() uint64 { return o.failed.Load() }

// Flush waits until every line queued so far has been written, or ctx
// ends (its error is returned).
func (o *Observer) Flush(ctx context.Context) error {
	for {
		o.mu.Lock()
		if !o.running {
			o.mu.Unlock()
			return nil
		}
		idle := o.idle
		o.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops accepting steps (later ones are dropped) and waits until
// the lines queued are written: call Flush with a deadline first to bound
// the wait on a Writer that may block. It does not close Config.Writer.
// Close returns nil; it may be called more than once.
func (o *Observer) Close() error {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	return o.Flush(context.Background())
}
