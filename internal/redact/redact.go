// Package redact removes credentials from URLs and from text that holds URLs (error messages), for everything
// visor prints, logs or stores. It does not decide what is a secret beyond a URL's user information and
// key-like query parameters.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces credentials in URLs shown to people or stored.
const redacted = "REDACTED"

// secretParam matches query parameters that carry a credential (?api_key=…, ?token=…).
var secretParam = regexp.MustCompile(`(?i)(key|token|secret|password|passwd|auth|signature|sig)$`)

// URL returns raw with any credentials replaced by REDACTED: the user information before "@"
// (http://user:pass@host → http://REDACTED@host) and the values of query parameters named like a key or a
// token. It works on the text, so a URL that does not parse is redacted too. Use it for every endpoint that is
// printed, logged or stored; the client itself keeps the real URL.
func URL(raw string) string {
	s := redactUserinfo(raw, 0, "/?#")
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	frag := ""
	if h := strings.IndexByte(s[q:], '#'); h >= 0 {
		s, frag = s[:q+h], s[q+h:]
	}
	parts := strings.Split(s[q+1:], "&")
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); ok && err == nil && secretParam.MatchString(name) {
			parts[i] = k + "=" + redacted
		}
	}
	return s[:q+1] + strings.Join(parts, "&") + frag
}

// redactUserinfo redacts the user information of the URL whose authority starts at or after from and ends at
// one of stops; with no "://" the whole of raw is taken as an authority-first form (user:pass@host:port).
func redactUserinfo(raw string, from int, stops string) string {
	start := from
	switch i := strings.Index(raw[from:], "://"); {
	case from == 0 && strings.HasPrefix(raw, "//"): // scheme-relative: //user@host/x
		start = 2
	case i >= 0:
		start = from + i + 3
	case from > 0:
		return raw
	}
	end := len(raw)
	if j := strings.IndexAny(raw[start:], stops); j >= 0 {
		end = start + j
	}
	if at := strings.LastIndexByte(raw[start:end], '@'); at >= 0 {
		raw = raw[:start] + redacted + raw[start+at:]
	}
	return raw
}

// URLs redacts the user information of every URL inside s, such as the text of an error from net/http
// (which hides a password as *** but keeps the user name, where some servers take a token).
func URLs(s string) string {
	for from := 0; from < len(s); {
		i := strings.Index(s[from:], "://")
		if i < 0 {
			break
		}
		s = redactUserinfo(s, from, "/?# \t\n\"'`<>")
		from += i + 3
	}
	return s
}

// redactedError shows its error with the URLs in it redacted, and still unwraps to it.
type redactedError struct{ err error }

func (e redactedError) Error() string { return URLs(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }

// Error wraps err so that its text carries no credentials while errors.Is and errors.As still see through it;
// nil stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return redactedError{err}
}
