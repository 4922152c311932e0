package openai

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
)

// scrubErr returns err with no credential anywhere in its chain, for
// llm.Error.Err. An error is kept as it is when neither it nor any error
// it wraps shows a credential (with %v, %+v or %#v) or is a *url.Error
// (whose URL holds BaseURL's query: net/http puts the request's URL in
// the errors of Client.Do). Otherwise it is rebuilt: a *url.Error as a
// *url.Error with the URL redacted, a *net.OpError and an *os.SyscallError
// as themselves with their cause scrubbed, so that errors.As(err,
// &urlErr), errors.As(err, &netErr) and errors.Is(err,
// syscall.ECONNREFUSED) still hold; any other error as a stand-in with the
// same message, scrubbed, the same Timeout and Temporary answers, and its
// causes scrubbed in turn.
func (c *Client) scrubErr(err error) error {
	if err == nil || !c.tainted(err, 0) {
		return err
	}
	switch e := err.(type) {
	case *url.Error:
		return &url.Error{Op: e.Op, URL: c.scrub(redactURL(e.URL)), Err: c.scrubErr(e.Err)}
	case *net.OpError:
		cp := *e
		cp.Err = c.scrubErr(e.Err)
		if !c.shows(&cp) {
			return &cp
		}
	case *os.SyscallError:
		cp := *e
		cp.Err = c.scrubErr(e.Err)
		if !c.shows(&cp) {
			return &cp
		}
	}
	s := scrubbedError{msg: c.scrub(err.Error())}
	ne, isNet := err.(net.Error) // this node's answers; its causes keep their own
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, x := range u.Unwrap() {
			s.errs = append(s.errs, c.scrubErr(x))
		}
		return &scrubbedJoin{s}
	case interface{ Unwrap() error }:
		s.errs = []error{c.scrubErr(u.Unwrap())}
	}
	if isNet {
		return &scrubbedNetError{scrubbedError: s, timeout: ne.Timeout(), temporary: ne.Temporary()}
	}
	return &s
}

// tainted reports whether err or an error in its chain shows a credential
// or is a *url.Error.
func (c *Client) tainted(err error, depth int) bool {
	if err == nil || depth > 100 {
		return false
	}
	if _, ok := err.(*url.Error); ok || c.shows(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, x := range u.Unwrap() {
			if c.tainted(x, depth+1) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		return c.tainted(u.Unwrap(), depth+1)
	}
	return false
}

// shows reports whether err prints a credential with %v, %+v or %#v.
func (c *Client) shows(err error) bool {
	if len(c.secrets) == 0 {
		return false
	}
	for _, verb := range [...]string{"%v", "%+v", "%#v"} {
		s := fmt.Sprintf(verb, err)
		for _, secret := range c.secrets {
			if strings.Contains(s, secret) {
				return true
			}
		}
	}
	return false
}

// scrubbedError stands in for an error that showed a credential.
type scrubbedError struct {
	msg  string
	errs []error // its cause (one), scrubbed; several for scrubbedJoin
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Unwrap() error {
	if len(e.errs) == 0 {
		return nil
	}
	return e.errs[0]
}

// scrubbedJoin stands in for an error with several causes (errors.Join).
type scrubbedJoin struct{ s scrubbedError }

func (e *scrubbedJoin) Error() string   { return e.s.msg }
func (e *scrubbedJoin) Unwrap() []error { return e.s.errs }

// scrubbedNetError stands in for a net.Error.
type scrubbedNetError struct {
	scrubbedError
	timeout, temporary bool
}

func (e *scrubbedNetError) Timeout() bool   { return e.timeout }
func (e *scrubbedNetError) Temporary() bool { return e.temporary }

// rawURLCredentials returns the user name, the password and the values of
// credential query parameters of raw, read without url.Parse so that a
// BaseURL that does not parse (and is then quoted whole in the error of
// the first call) gives up its credentials too. Values are returned as
// written and unescaped.
func rawURLCredentials(raw string) []string {
	var out []string
	add := func(v string) {
		out = append(out, v)
		if u, err := url.QueryUnescape(v); err == nil && u != v {
			out = append(out, u)
		}
	}
	if start, end, ok := rawUserinfo(raw); ok {
		user, pw, hasPW := strings.Cut(raw[start:end], ":")
		add(user)
		if hasPW {
			add(pw)
		}
	}
	_, query, ok := strings.Cut(raw, "?")
	if !ok {
		return out
	}
	query, _, _ = strings.Cut(query, "#")
	for _, p := range splitQuery(query) {
		k, v, ok := strings.Cut(p, "=")
		if ok && credentialName(unescapeLoose(k)) {
			add(v)
		}
	}
	return out
}

// rawUserinfo finds the userinfo of raw ("user:password" before an '@' in
// the authority): it returns where it starts and ends and whether there is
// one.
func rawUserinfo(raw string) (start, end int, ok bool) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return 0, 0, false
	}
	start = i + 3
	rest := raw[start:]
	if e := strings.IndexAny(rest, "/?#"); e >= 0 {
		rest = rest[:e]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return 0, 0, false
	}
	return start, start + at, true
}

// splitQuery splits a raw query into its pairs at '&' and ';'.
func splitQuery(query string) []string {
	return strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' })
}

// redactQuery replaces the values of the credential parameters of a raw
// query (see credentialName) by REDACTED, keeping everything else as
// written, separators included. It reports whether it replaced any.
func redactQuery(query string) (string, bool) {
	var b strings.Builder
	changed := false
	for query != "" {
		pair, rest := query, ""
		if i := strings.IndexAny(query, "&;"); i >= 0 {
			pair, rest = query[:i], query[i:]
		}
		if k, _, ok := strings.Cut(pair, "="); ok && credentialName(unescapeLoose(k)) {
			pair = k + "=REDACTED"
			changed = true
		}
		b.WriteString(pair)
		if rest != "" {
			b.WriteByte(rest[0])
			rest = rest[1:]
		}
		query = rest
	}
	return b.String(), changed
}

// redactRawURL is redactURL for a URL that does not parse: it replaces the
// userinfo and the values of credential query parameters, keeping the rest
// as written.
func redactRawURL(raw string) string {
	if start, end, ok := rawUserinfo(raw); ok {
		red := "REDACTED"
		if strings.Contains(raw[start:end], ":") {
			red = "REDACTED:REDACTED"
		}
		raw = raw[:start] + red + raw[end:]
	}
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	query, _ = redactQuery(query)
	raw = base + "?" + query
	if hasFrag {
		raw += "#" + frag
	}
	return raw
}

func unescapeLoose(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}
