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
	"github.com/visorhq/visor/engine/conductor"
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
	// Everything that changes what the server runs is in the key: the files, the binary, the launch flags, the
	// plan and what it plans for. A server started otherwise is never reused by mistake.
	bin, _ := llamacpp.Find(e.server)
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d|%d|%s|%s|%s|%s|%s", abs(e.model), abs(e.mmproj), e.ctx, e.parallel,
		strings.Join(e.extra, " "), e.cacheType, e.plan, e.gpu, abs(bin))))
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
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var ef engineFlags
	ef.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if ef.endpoint != "" {
		return errors.New("serve: --endpoint makes no sense here: serve starts a llama-server for --model")
	}
	if _, st, ok := findServed(ctx, ef); ok {
		return fmt.Errorf("serve: %s is already served at %s by visor pid %d", ef.model, st.URL, st.VisorPID)
	}
	t := turn{engine: ef, noStore: true, agentOptions: agentOptions{maxSteps: 1}, toolFlags: toolFlags{format: "hermes"}}
	if err := t.validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(runDir(), 0o755); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	path := filepath.Join(runDir(), serveKey(ef)+".json")
	advertiseReady := func(r conductor.Ready) {
		if srv, _ := r.Process.(*llamacpp.Server); srv != nil {
			advertise(ef, srv)
		}
	}
	failed := make(chan error, 1)
	// The conductor restarts a crash at the same address, so clients keep their URL, and gives up on a server
	// that keeps crashing rather than restarting it forever.
	cond := conductor.New(conductor.Config{Launch: launcher(ef, stderr, logger, nil), Logger: logger,
		OnEvent: func(ev conductor.Event) {
			switch ev.Kind {
			case conductor.EventCrashed:
				fmt.Fprintf(stderr, "the engine crashed: %v\nrestarting it …\n", ev.Err)
			case conductor.EventFailed:
				select {
				case failed <- ev.Err:
				default:
				}
			}
		}})
	defer cond.Close(context.Background())
	defer os.Remove(path)
	r, err := cond.EnsureReady(ctx)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	advertiseReady(r)
	props, _ := llamacpp.ReadProps(ctx, r.Client)
	fmt.Fprintf(stdout, "serving %s at %s (n_ctx %d, vision %v); visor commands with the same --model reuse it; Ctrl-C stops it\n",
		filepath.Base(ef.model), r.URL, props.NCtx, props.Vision)
	gen := r.Generation
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return fmt.Errorf("serve: %w", err)
		case <-tick.C:
			if cond.State() != conductor.StateReady {
				continue
			}
			if r, err := cond.EnsureReady(ctx); err == nil && r.Generation != gen {
				gen = r.Generation
				advertiseReady(r)
				fmt.Fprintf(stderr, "engine restarted at %s\n", r.URL)
			}
		}
	}
}

// advertise writes the file by which later visor commands for the same setup find srv and reuse it; it returns
// the file's path (for removing it when srv stops), or "" when it could not be written.
func advertise(ef engineFlags, srv *llamacpp.Server) string {
	if err := os.MkdirAll(runDir(), 0o755); err != nil {
		return ""
	}
	path := filepath.Join(runDir(), serveKey(ef)+".json")
	st := serveState{URL: srv.URL(), PID: srv.PID(), VisorPID: os.Getpid(), Model: ef.model, MMProj: ef.mmproj, Started: time.Now()}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return ""
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return ""
	}
	return path
}
