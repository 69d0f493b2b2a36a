package config

import (
	"errors"
	"strings"
	"testing"
)

// TestImageWindowSetting: image_window takes keep and batch, or off; a window that keeps nothing, or off with
// a size, is refused at its line with the fix.
func TestImageWindowSetting(t *testing.T) {
	c, err := Parse([]byte("image_window:\n  keep: 3\n  batch: 4\n"), "/tmp/config.yaml")
	if err != nil || c.ImageWindow == nil || c.ImageWindow.Keep != 3 || c.ImageWindow.Batch != 4 {
		t.Fatalf("%+v %v", c.ImageWindow, err)
	}
	if c, err := Parse([]byte("image_window: {off: true}\n"), "/tmp/config.yaml"); err != nil || !c.ImageWindow.Off {
		t.Fatalf("off: %+v %v", c.ImageWindow, err)
	}
	for _, bad := range []string{"image_window:\n  batch: 4\n", "image_window: {off: true, keep: 2}\n"} {
		_, err := Parse([]byte("tools: [read_file]\n"+bad), "/tmp/config.yaml")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "config.yaml:2:") || !strings.Contains(err.Error(), "—") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
