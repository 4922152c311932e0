package agent

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"

	"github.com/valetkit/valet/credentials"
)

// A secret a tool read from Config.Credentials has no shape maskText knows
// when it sits where no name announces it: a Telegram bot token in a URL
// path (https://api.telegram.org/bot<token>/sendMessage), which net/http
// quotes in its errors. The run knows that exact value: the store it gives
// its tool calls (run.credentials) records the string values its lookups
// return, and scrubToolResult masks them in the tool's result and error
// before they reach the model, the records, the logs, the spans and the
// transcript.

// Bounds of what a run records (seenCreds).
const (
	seenMinLen    = 8        // shorter strings are not recorded: too common to mask
	seenMaxValues = 64       // values recorded per run, their encoded forms included
	seenMaxBytes  = 64 << 10 // bytes recorded per run
)

// seenCreds holds the string values a run's tool calls read from (or wrote
// to) the credential store, with their percent- and JSON-encoded forms,
// longest first. It is safe for concurrent use: tool calls run in
// parallel.
type seenCreds struct {
	mu    sync.Mutex
	vals  []string
	bytes int
}

// watchCredentials returns s recording in a new seenCreds every value read
// or written through it; nil for nil. The result implements Updater when s
// does, and nothing else.
func watchCredentials(s credentials.Store) credentials.Store {
	if s == nil {
		return nil
	}
	w := seenStore{Store: s, seen: &seenCreds{}}
	if u, ok := s.(credentials.Updater); ok {
		return &seenUpdater{seenStore: w, u: u}
	}
	return &w
}

// seenIn returns the seenCreds of a store watchCredentials made, or nil.
func seenIn(s credentials.Store) *seenCreds {
	switch w := s.(type) {
	case *seenStore:
		return w.seen
	case *seenUpdater:
		return w.seen
	}
	return nil
}

type seenStore struct {
	credentials.Store
	seen *seenCreds
}

type seenUpdater struct {
	seenStore
	u credentials.Updater
}

func (w *seenStore) Get(ctx context.Context, tenantID, service, account string) (credentials.Secret, error) {
	sec, err := w.Store.Get(ctx, tenantID, service, account)
	if err == nil {
		w.seen.addSecret(sec)
	}
	return sec, err
}

func (w *seenStore) Save(ctx context.Context, tenantID, service, account string, creds any) error {
	w.seen.addValue(creds)
	return w.Store.Save(ctx, tenantID, service, account, creds)
}

func (w *seenUpdater) Update(ctx context.Context, tenantID, service, account string, fn func(ctx context.Context, old credentials.Secret) (any, error)) error {
	return w.u.Update(ctx, tenantID, service, account, func(ctx context.Context, old credentials.Secret) (any, error) {
		w.seen.addSecret(old)
		v, err := fn(ctx, old)
		if err == nil {
			w.seen.addValue(v)
		}
		return v, err
	})
}

// addValue records the string values of creds as a store would encode
// them (credentials.Encode).
func (c *seenCreds) addValue(creds any) {
	if sec, err := credentials.Encode(creds); err == nil {
		c.addSecret(sec)
	}
}

// addSecret records the string leaves of sec's JSON object.
func (c *seenCreds) addSecret(sec credentials.Secret) {
	var v any
	if sec.Decode(&v) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.walk(v)
}

func (c *seenCreds) walk(v any) {
	switch x := v.(type) {
	case string:
		if len(x) >= seenMinLen {
			c.add(x)
			c.add(url.QueryEscape(x))
			c.add(url.PathEscape(x))
			if b, err := json.Marshal(x); err == nil {
				c.add(string(b[1 : len(b)-1]))
			}
		}
	case map[string]any:
		for _, e := range x {
			c.walk(e)
		}
	case []any:
		for _, e := range x {
			c.walk(e)
		}
	}
}

// add records v, keeping vals longest first so that a value holding
// another is masked whole. Past the bounds it records nothing more.
func (c *seenCreds) add(v string) {
	if len(c.vals) >= seenMaxValues || c.bytes+len(v) > seenMaxBytes {
		return
	}
	i := 0
	for ; i < len(c.vals) && len(c.vals[i]) >= len(v); i++ {
		if c.vals[i] == v {
			return
		}
	}
	c.vals = append(c.vals, "")
	copy(c.vals[i+1:], c.vals[i:])
	c.vals[i] = v
	c.bytes += len(v)
}

// mask returns s with every recorded value replaced by "***"; s itself
// when it holds none.
func (c *seenCreds) mask(s string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.vals {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "***")
		}
	}
	return s
}

// maskedError is an error whose text had recorded credential values
// masked; errors.Is and errors.As still reach the original.
type maskedError struct {
	err error
	msg string
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// maskErr returns err with its recorded values masked, err itself when its
// text holds none.
func (c *seenCreds) maskErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if m := c.mask(msg); m != msg {
		return &maskedError{err: err, msg: m}
	}
	return err
}
