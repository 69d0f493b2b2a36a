package termtext

import (
	"bytes"
	"os"
	"testing"
)

// A pipe, /dev/null (a character device, like a terminal) and a buffer are not terminals.
func TestIsTerminalRefusesWhatIsNone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for name, f := range map[string]any{"pipe": w, "/dev/null": null, "buffer": &bytes.Buffer{}} {
		if IsTerminal(f) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
}
