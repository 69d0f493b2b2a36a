package llamacpp_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestStartOnAFixedPort: a server given a port listens there; a second one given the same port is refused before
// it starts, naming the port, rather than taking the first one's health check for its own.
func TestStartOnAFixedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	chat, _, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := enginetest.Start(t, llamacpp.Config{Model: chat, Ctx: 4096, Parallel: 1, Port: port})
	if want := "http://127.0.0.1:" + strconv.Itoa(port); s.URL() != want {
		t.Fatalf("server at %s, want %s", s.URL(), want)
	}
	resp, err := http.Get(s.URL() + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health on the fixed port: %v %v", resp, err)
	}
	resp.Body.Close()
	_, err = llamacpp.Start(context.Background(), llamacpp.Config{Binary: enginetest.Binary(t), Model: chat, Port: port})
	if err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" on 127.0.0.1 is in use") {
		t.Fatalf("a second server on port %d: %v, want it refused as in use", port, err)
	}
}
