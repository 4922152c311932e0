package mcptool

import (
	"fmt"
	"io"
	"mime"
	"net/http"
)

// tooLarge is the error a limited reader returns once a message exceeds
// Config.MaxMessageBytes.
func tooLarge(limit int) error {
	return fmt.Errorf("mcptool: the server sent a message larger than %d bytes (Config.MaxMessageBytes); the rest is not read", limit)
}

// limitTransport caps what is read of each response: a JSON body at
// limit bytes, an event stream at limit bytes per event.
type limitTransport struct {
	base  http.RoundTripper
	limit int
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		resp.Body = &limitReader{rc: resp.Body, limit: t.limit, sep: sepEvent}
	} else {
		resp.Body = &limitReader{rc: resp.Body, limit: t.limit}
		if resp.ContentLength > int64(t.limit) {
			resp.ContentLength = -1 // a reader must not size a buffer by it
		}
	}
	return resp, nil
}

// Where a limitReader starts counting again.
const (
	sepNone  = iota // never: the whole body is one message
	sepEvent        // after a blank line (the end of a server-sent event)
)

// limitReader reads at most limit bytes of one message and fails past
// them, never reading further.
type limitReader struct {
	rc    io.ReadCloser
	limit int
	sep   int
	n     int // bytes of the current message
	line  int // bytes of the current line, \r left out (sepEvent)
	err   error
}

func (r *limitReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.sep == sepNone && len(p) > r.limit-r.n+1 {
		p = p[:r.limit-r.n+1] // one byte more tells a message of limit bytes from a longer one
	}
	n, err := r.rc.Read(p)
	for i, c := range p[:n] {
		r.n++
		switch {
		case r.sep == sepEvent && c == '\n':
			if r.line == 0 {
				r.n = 0
			}
			r.line = 0
		case r.sep == sepEvent && c != '\r':
			r.line++
		}
		if r.n > r.limit {
			r.err = tooLarge(r.limit)
			return i, r.err
		}
	}
	return n, err
}

func (r *limitReader) Close() error { return r.rc.Close() }
