package web_test

import (
	"net/http/httptest"
	"testing"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/web"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

func realService(t *testing.T, srv *llamacpp.Server, store *memory.Store) *session.Service {
	return testkit.Service(t, srv, store, func(c *session.Config) { c.AgentName = "web" })
}

func fakeService(t testing.TB, a session.Agent, tune func(*session.Config)) *session.Service {
	return testkit.FakeService(t, a, tune)
}

// serveChat is a test server of the web chat of cfg; the test closes it.
func serveChat(t testing.TB, cfg web.Config) *httptest.Server {
	t.Helper()
	ui, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return httptest.NewServer(ui)
}
