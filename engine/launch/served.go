package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/safefile"
)

// A running engine that others may reuse (`visor serve`, the gateway's) leaves a small JSON file named by its
// spec's Key, so that later commands for the same spec reuse the server instead of loading gigabytes of weights
// again.

// Served is what the file says about a running engine.
type Served struct {
	URL      string    `json:"url"`
	PID      int       `json:"pid"`       // llama-server
	VisorPID int       `json:"visor_pid"` // the visor process that owns it
	Model    string    `json:"model"`
	MMProj   string    `json:"mmproj,omitempty"`
	Started  time.Time `json:"started"`
}

// RunDir holds the files.
// maxServedFile bounds a served-engine file (a URL and a few ids).
const maxServedFile = 64 << 10

func RunDir() string { return filepath.Join(llamacpp.InstallDir(), "run") }

func servedPath(k Key) string { return filepath.Join(RunDir(), k.ID()+".json") }

// FindServed returns a healthy engine another visor process runs for key, if any. Stale files (owner gone, server
// not answering) are removed.
func FindServed(ctx context.Context, key Key) (Served, bool) {
	path := servedPath(key)
	b, err := safefile.ReadFile(path, maxServedFile) // a FIFO planted there must not block
	if err != nil {
		return Served{}, false
	}
	var st Served
	if json.Unmarshal(b, &st) != nil || syscall.Kill(st.VisorPID, 0) != nil {
		_ = os.Remove(path)
		return Served{}, false
	}
	var h struct {
		Status string `json:"status"`
	}
	if err := engine.NewClient(st.URL, "").Get(ctx, "/health", &h); err != nil || h.Status != "ok" {
		return Served{}, false
	}
	return st, true
}

// Advertise writes the file by which later visor commands for the same spec find srv and reuse it; it returns
// the file's path (for removing it when srv stops). When it cannot be written the error says why: the server
// still runs, but the next command would load a second copy of the model beside it.
func Advertise(s Spec, srv *llamacpp.Server) (string, error) {
	path := servedPath(s.Key())
	st := Served{URL: srv.URL(), PID: srv.PID(), VisorPID: os.Getpid(), Model: s.Model, MMProj: s.Projector, Started: time.Now()}
	if err := writeServed(path, st); err != nil {
		return "", err
	}
	return path, nil
}

// writeServed writes st at path whole (through a temporary file and a rename), so a reader never sees half.
func writeServed(path string, st Served) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("advertise the engine: %w", err)
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return fmt.Errorf("advertise the engine: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		_ = os.Remove(path + ".tmp")
		return fmt.Errorf("advertise the engine: %w", err)
	}
	return nil
}

// ServedPath is where the file for s lives (serve removes it when it stops).
func ServedPath(s Spec) string { return servedPath(s.Key()) }

// servedURL is the engine address a served-engine file names, "" when unreadable.
func servedURL(path string) string {
	b, err := safefile.ReadFile(path, maxServedFile) // a FIFO planted there must not block
	if err != nil {
		return ""
	}
	var st Served
	if json.Unmarshal(b, &st) != nil {
		return ""
	}
	return st.URL
}
