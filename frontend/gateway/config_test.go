package gateway_test

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/visorhq/visor/frontend/gateway"
)

// TestConfigPorts: a model's fixed engine port is refused, by the model's name, when it is out of range, given to
// an endpoint, shared with another model, the gateway's own, or already in use; a free one is accepted.
func TestConfigPorts(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"models:\n  a: {model: a.gguf, port: 70000}\n", `model "a": port 70000: give a port from 1 to 65535`},
		{"models:\n  a: {model: a.gguf, port: -1}\n", `model "a": port -1: give a port from 1 to 65535`},
		{"models:\n  a: {endpoint: 'http://h:1/v1', port: 8123}\n", `model "a": port is for a model visor starts`},
		{"models:\n  a: {model: a.gguf, port: 8123}\n  b: {model: b.gguf, port: 8123}\n", `model "b": port 8123 is also model "a"'s`},
	} {
		if _, err := gateway.ParseConfig("models.yaml", []byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	used := l.Addr().(*net.TCPAddr).Port
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	fc, err := gateway.ParseConfig("models.yaml", []byte("models:\n  a: {model: a.gguf, port: "+strconv.Itoa(used)+
		"}\n  b: {model: b.gguf, port: 8080}\n  c: {model: c.gguf, port: "+strconv.Itoa(freePort)+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = fc.CheckPorts("127.0.0.1:8080")
	for _, want := range []string{`model "a": port ` + strconv.Itoa(used) + ` on 127.0.0.1 is in use`,
		`model "b": port 8080 is the gateway's own (127.0.0.1:8080)`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPorts: %v, want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), `model "c"`) {
		t.Errorf("CheckPorts refused the free port: %v", err)
	}
}
