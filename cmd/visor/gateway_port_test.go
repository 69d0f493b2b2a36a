package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestGatewayFixedEnginePort: a model with port: in models.yaml has its llama-server on that port; the same
// port given twice, or one in use, is refused at start by the model's name, and --port among args: stays refused
// with the hint to use port:.
func TestGatewayFixedEnginePort(t *testing.T) {
	enginetest.Binary(t)
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir())
	t.Setenv("VISOR_LLAMA_SERVER", enginetest.Binary(t))
	dir := t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	used := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct{ yaml, want string }{
		{"models:\n  a: {model: " + chat + ", port: " + used + "}\n", `model "a": port ` + used + ` on 127.0.0.1 is in use`},
		{"models:\n  a: {model: " + chat + ", port: 8123}\n  b: {model: " + chat + ", port: 8123}\n", `model "b": port 8123 is also model "a"'s`},
		{"models:\n  a: {model: " + chat + ", args: [--port, '8123']}\n", `"--port"`},
	} {
		_, _, err := visor(t, "gateway", "--config", testkit.WriteFile(t, dir, "bad.yaml", tc.yaml), "--addr", "127.0.0.1:0")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
		if strings.Contains(tc.yaml, "args:") && (err == nil || !strings.Contains(err.Error(), "port: in models.yaml")) {
			t.Errorf("--port in args: %v, want the hint to use port:", err)
		}
	}
	l.Close() // now free: the engine may have it
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testkit.WriteFile(t, dir, "models.yaml", "preload: [tiny]\nmodels:\n  tiny: {model: "+chat+", ctx: 4096, args: [-t, '1'], port: "+used+"}\n")
	_, done, errb := startGateway(t, ctx, "tiny", "--config", cfg, "--addr", "127.0.0.1:0")
	if b := get(t, "http://127.0.0.1:"+used+"/health"); !strings.Contains(b, "ok") {
		t.Errorf("the engine's /health on port %s: %q\n%s", used, b, errb.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("gateway: %v\n%s", err, errb.String())
	}
}
