package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/llamacpp"
)

// A running `visor serve` leaves a small JSON file per engine so that later commands for the same model reuse the
// server instead of loading gigabytes of weights again.
type serveState struct {
	URL      string    `json:"url"`
	PID      int       `json:"pid"`       // llama-server
	VisorPID int       `json:"visor_pid"` // the visor serve process that owns it
	Model    string    `json:"model"`
	MMProj   string    `json:"mmproj,omitempty"`
	Started  time.Time `json:"started"`
}

func runDir() string { return filepath.Join(llamacpp.InstallDir(), "run") }

// serveKey names the engine for a model setup: the same files and launch flags give the same key.
func serveKey(e engineFlags) string {
	abs := func(p string) string {
		if p == "" {
			return ""
		}
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d|%d|%s", abs(e.model), abs(e.mmproj), e.ctx, e.parallel,
		strings.Join(e.extra, " "))))
	return hex.EncodeToString(h[:8])
}

// findServed returns a healthy server that `visor serve` runs for this setup, if any. Stale files (owner gone,
// server not answering) are removed.
func findServed(ctx context.Context, e engineFlags) (*engine.Client, serveState, bool) {
	path := filepath.Join(runDir(), serveKey(e)+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, serveState{}, false
	}
	var st serveState
	if json.Unmarshal(b, &st) != nil || syscall.Kill(st.VisorPID, 0) != nil {
		_ = os.Remove(path)
		return nil, serveState{}, false
	}
	c := engine.NewClient(st.URL, "")
	var h struct {
		Status string `json:"status"`
	}
	if err := c.Get(ctx, "/health", &h); err != nil || h.Status != "ok" {
		return nil, serveState{}, false
	}
	return c, st, true
}

// cmdServe runs llama-server in the foreground for a model and advertises it to other visor commands until
// Ctrl-C or a crash.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ef engineFlags
	ef.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if ef.endpoint != "" {
		return errors.New("serve: --endpoint makes no sense here: serve starts a llama-server for --model")
	}
	if _, st, ok := findServed(ctx, ef); ok {
		return fmt.Errorf("serve: %s is already served at %s by visor pid %d", ef.model, st.URL, st.VisorPID)
	}
	conn, err := openEngine(ctx, ef, stderr, logger)
	if err != nil {
		return err
	}
	defer conn.close()
	if err := os.MkdirAll(runDir(), 0o755); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	path := filepath.Join(runDir(), serveKey(ef)+".json")
	st := serveState{URL: conn.server.URL(), PID: conn.server.PID(), VisorPID: os.Getpid(), Model: ef.model,
		MMProj: ef.mmproj, Started: time.Now()}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer os.Remove(path)
	fmt.Fprintf(stdout, "serving %s at %s (n_ctx %d, vision %v); visor commands with the same --model reuse it; Ctrl-C stops it\n",
		filepath.Base(ef.model), st.URL, conn.props.NCtx, conn.props.Vision)
	// A crash is restarted at the same address, so clients keep their URL; a server that keeps crashing is
	// given up on rather than restarted forever.
	var crashes []time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-conn.server.Done():
		}
		crashes = append(crashes, time.Now())
		if len(crashes) >= 3 && time.Since(crashes[len(crashes)-3]) < time.Minute {
			return fmt.Errorf("serve: llama-server crashed 3 times within a minute; last: %w", conn.server.Err())
		}
		if err := conn.recover(ctx, nil, "", stderr); err != nil {
			return err
		}
		st.PID = conn.server.PID()
		b, _ := json.MarshalIndent(st, "", "  ")
		_ = os.WriteFile(path, b, 0o644)
	}
}
