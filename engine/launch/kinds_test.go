package launch_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestValidateRefusesTheWrongKindOfFile: the projector given as --model, the chat model as --mmproj, or a text
// file as --mmproj are refused by Validate, naming the flag, the file and the swap, before llama-server loads
// for seconds and fails with "CLIP cannot be used as main model" or "failed to read magic".
func TestValidateRefusesTheWrongKindOfFile(t *testing.T) {
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(dir, "notes.gguf")
	if err := os.WriteFile(notes, []byte("my notes, not a model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The server is any existing file: Validate checks the files, not the binary's behaviour.
	server := os.Args[0]
	for _, c := range []struct {
		name        string
		model, proj string
		want        string // "" : no complaint about either file
	}{
		{"the right files", chat, proj, ""},
		{"the projector as the model", proj, "", "--model " + proj + ": is a vision projector, not a chat model: pass it as --mmproj"},
		{"the two swapped", proj, chat, "--mmproj " + chat + ": is a chat model (architecture "},
		{"the chat model as the projector", chat, chat, "--mmproj " + chat + ": is a chat model"},
		{"a text file as the projector", chat, notes, "--mmproj " + notes + ": not a GGUF file"},
		{"a text file as the model", notes, "", "--model " + notes + ": not a GGUF model file"},
	} {
		err := launch.Spec{Model: c.model, Projector: c.proj, Server: server, Slots: 1, Plan: "off"}.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
		// A file that is no GGUF keeps the reader's error, so a caller can tell it from an I/O failure.
		if strings.Contains(c.want, "not a GGUF") && !errors.Is(err, gguf.ErrFormat) {
			t.Errorf("%s: %v does not wrap gguf.ErrFormat", c.name, err)
		}
	}
}
