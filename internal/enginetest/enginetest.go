// Package enginetest gives tests a real llama-server: it finds the binary (skipping with install instructions
// outside CI, failing in CI where the engine must be present) and starts servers that die with the test.
package enginetest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/testmodel"
)

// Binary returns the llama-server to test against. Outside CI a missing engine skips the test with the command
// that installs it; in CI (CI set) it fails, because real-engine tests must never silently skip there.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := llamacpp.Find("")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("real-engine test needs llama-server in CI: %v", err)
		}
		t.Skipf("skipping real-engine test: %v (install with: make engine)", err)
	}
	return bin
}

// SharedModel returns a real trained model from the repository's testdata/models (stories260K.gguf ships there
// with its licence), or from $VISOR_SHARED/models for a larger one a developer has. A missing file fails the
// test: the repository's own models are always there, so a miss is a broken checkout, not a reason to skip.
func SharedModel(t testing.TB, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	for _, dir := range []string{filepath.Join(root, "testdata"), os.Getenv("VISOR_SHARED")} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "models", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("test model %s not found in %s (nor in $VISOR_SHARED/models)", name, filepath.Join(root, "testdata", "models"))
	return ""
}

// Start runs a server for the test and stops it in Cleanup. cfg.Binary defaults to Binary(t).
func Start(t testing.TB, cfg llamacpp.Config) *llamacpp.Server {
	t.Helper()
	if cfg.Binary == "" {
		cfg.Binary = Binary(t)
	}
	if cfg.LogFile == "" {
		cfg.LogFile = filepath.Join(t.TempDir(), "llama-server.log")
	}
	if cfg.Threads == 0 {
		// One thread and no polling: tests run many servers at once on few cores, and llama.cpp's spinning
		// worker threads would take the cores from each other.
		cfg.Threads = 1
	}
	cfg.ExtraArgs = append(cfg.ExtraArgs, "--poll", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := llamacpp.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start llama-server: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// Tiny starts a server on visor's generated chat model (and its vision projector when vision is set): it answers
// "Hi!" to plain chat, calls a tool when tools are offered, and answers after a tool result.
func Tiny(t testing.TB, vision bool, cfg llamacpp.Config) *llamacpp.Server {
	t.Helper()
	chat, proj, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return startTiny(t, chat, proj, vision, cfg)
}

// TinyHybrid starts a server on visor's generated hybrid chat model (architecture qwen35: Gated DeltaNet layers
// and one full-attention layer), which answers exactly as Tiny's model does but keeps a recurrent state the server
// cannot cut back, as Qwen3.5/3.6 do. With vision it loads a projector built with opt.
func TinyHybrid(t testing.TB, vision bool, opt testmodel.ProjectorOptions, cfg llamacpp.Config) *llamacpp.Server {
	t.Helper()
	chat, proj, err := testmodel.HybridFiles(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return startTiny(t, chat, proj, vision, cfg)
}

// startTiny starts a generated model with its projector when vision is set, in a 4096-token context and one
// slot unless cfg says otherwise.
func startTiny(t testing.TB, chat, proj string, vision bool, cfg llamacpp.Config) *llamacpp.Server {
	t.Helper()
	cfg.Model = chat
	if vision {
		cfg.MMProj = proj
	}
	if cfg.Ctx == 0 {
		cfg.Ctx = 4096
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 1
	}
	return Start(t, cfg)
}
