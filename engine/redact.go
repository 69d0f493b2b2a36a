package engine

import (
	"errors"
	"fmt"
	"net"

	"github.com/visorhq/visor/internal/redact"
)

// RedactURL returns the endpoint raw with any credentials in it replaced by REDACTED (http://user:pass@host →
// http://REDACTED@host, ?api_key=… → ?api_key=REDACTED). Use it for every endpoint that is printed, logged or
// stored, such as a session's model; the Client keeps the real URL.
func RedactURL(raw string) string { return redact.URL(raw) }

// redactErr is a request's error without credentials. One that never reached a server (refused, no such host)
// says what to do: Go's "dial tcp 127.0.0.1:1: connect: connection refused" was all a mistyped --endpoint got.
func redactErr(err error) error {
	err = redact.Error(err)
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("no server answers there (%w): start llama-server at that address, or correct the URL", err)
	}
	return err
}
