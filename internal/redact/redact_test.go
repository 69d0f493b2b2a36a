package redact

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://user:pass@host:8080/v1":            "http://REDACTED@host:8080/v1",
		"https://token@api.example.com":            "https://REDACTED@api.example.com",
		"http://u:p@ss@host/":                      "http://REDACTED@host/",
		"user:pass@host:8080":                      "REDACTED@host:8080",
		"http://host/v1?api_key=sk-1&model=m":      "http://host/v1?api_key=REDACTED&model=m",
		"http://host/?Token=abc#frag":              "http://host/?Token=REDACTED#frag",
		"http://127.0.0.1:8080":                    "http://127.0.0.1:8080",
		"http://host/path@not-userinfo":            "http://host/path@not-userinfo",
		"http://a b:c@host":                        "http://REDACTED@host", // does not parse as a URL
		"":                                         "",
		"http://[::1]:8080/v1?x-goog-signature=zz": "http://[::1]:8080/v1?x-goog-signature=REDACTED",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
	msg := `Post "http://alice:***@127.0.0.1:1/v1/chat/completions": dial tcp; then https://tok@h/x`
	if got := URLs(msg); strings.Contains(got, "alice") || strings.Contains(got, "tok@") || !strings.Contains(got, "http://REDACTED@127.0.0.1:1/v1") {
		t.Errorf("URLs: %s", got)
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	t.Parallel()
	err := Error(errors.Join(errors.New(`Get "http://bob:pw@h/x"`), io.EOF))
	if !errors.Is(err, io.EOF) || strings.Contains(err.Error(), "bob") || Error(nil) != nil {
		t.Errorf("%v", err)
	}
}
