package redact

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzURL: whatever the input, the redacted URL holds no user information net/url would find, and a URL
// with nothing to redact comes back unchanged.
func FuzzURL(f *testing.F) {
	for _, s := range []string{"http://u:p@h/x", "https://tok@h", "u:p@h:1", "http://a@b@c/", "http://h/?key=v",
		"http://[::1]:80/?x=1#f", "http://u:p@h?token=t#x@y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := URL(raw)
		if u, err := url.Parse(out); err == nil && u.User != nil && u.User.String() != "REDACTED" {
			t.Fatalf("URL(%q) = %q keeps user information %q", raw, out, u.User.String())
		}
		if !strings.Contains(raw, "@") && !strings.Contains(raw, "?") && out != raw {
			t.Fatalf("URL(%q) = %q changed a URL with nothing to redact", raw, out)
		}
	})
}
