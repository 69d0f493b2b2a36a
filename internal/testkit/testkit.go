// Package testkit holds test helpers shared by visor's packages: an always-ready engine and a session service
// over a real llama-server. It is for tests only (it imports testing).
package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// FixedEngine is an engine that is always ready, for tests about the layers above the conductor.
type FixedEngine struct{ R conductor.Ready }

// EnsureReady implements session.Engine.
func (e FixedEngine) EnsureReady(context.Context) (conductor.Ready, error) { return e.R, nil }

// Recover implements session.Engine.
func (e FixedEngine) Recover(context.Context) (conductor.Ready, error) { return e.R, nil }

// ReadyOf is srv as the conductor reports a ready server.
func ReadyOf(srv *llamacpp.Server) conductor.Ready {
	return conductor.Ready{Client: srv.Client(), URL: srv.URL(), Process: srv, Generation: 1}
}

// Service is the session service over a real llama-server; store may be nil, tune may change the config.
func Service(t testing.TB, srv *llamacpp.Server, store *memory.Store, tune func(*session.Config)) *session.Service {
	t.Helper()
	cfg := session.Config{Engine: FixedEngine{ReadyOf(srv)}, Agent: session.AgentConfig{Tools: tools.NewRegistry()},
		Vision: session.VisionUnknown}
	if store != nil {
		cfg.Store = store
	}
	return newService(t, cfg, tune)
}

// FakeService runs turns with a stand-in agent, for tests about which requests a front end lets through.
func FakeService(t testing.TB, a session.Agent, tune func(*session.Config)) *session.Service {
	t.Helper()
	cfg := session.Config{Engine: FixedEngine{conductor.Ready{Client: engine.NewClient("http://127.0.0.1:9", ""), Generation: 1}},
		Vision:   session.VisionYes,
		NewAgent: func(conductor.Ready, llamacpp.Props) (session.Agent, error) { return a, nil }}
	return newService(t, cfg, tune)
}

// newService makes the service of cfg after tune, which lets a test change any of it.
func newService(t testing.TB, cfg session.Config, tune func(*session.Config)) *session.Service {
	t.Helper()
	if tune != nil {
		tune(&cfg)
	}
	svc, err := session.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// PNG is a w×h PNG with varied pixels (so two sizes never share a cache entry).
func PNG(t testing.TB, w, h int) []byte { return SeededPNG(t, w, h, 0) }

// SeededPNG is PNG with its pixels shifted by seed, so images of one size differ too.
func SeededPNG(t testing.TB, w, h, seed int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*13 + seed)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// WritePNG writes SeededPNG(w, h, seed) to path and returns path.
func WritePNG(t testing.TB, path string, w, h, seed int) string {
	t.Helper()
	if err := os.WriteFile(path, SeededPNG(t, w, h, seed), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// WriteFile writes content to name (slashes make folders) under dir and returns its path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Event is one server-sent event of the web chat's streams: its name and its data, decoded.
type Event struct {
	Kind string
	Data map[string]any
}

// ReadEvents reads the server-sent events (event: NAME, data: JSON) of r to its end.
func ReadEvents(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	var kind string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				return out, fmt.Errorf("bad event data %q: %w", line, err)
			}
			out = append(out, Event{kind, d})
		}
	}
	return out, sc.Err()
}
