package engine

import "github.com/visorhq/visor/internal/redact"

// RedactURL returns the endpoint raw with any credentials in it replaced by REDACTED (http://user:pass@host →
// http://REDACTED@host, ?api_key=… → ?api_key=REDACTED). Use it for every endpoint that is printed, logged or
// stored, such as a session's model; the Client keeps the real URL.
func RedactURL(raw string) string { return redact.URL(raw) }

func redactErr(err error) error { return redact.Error(err) }
