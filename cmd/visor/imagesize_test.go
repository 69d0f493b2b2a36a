package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
)

// Issue 22, "image sizes show the resized bytes, twice": an attached screenshot larger than the projector's
// encoder is resized at intake; the chat and the web page say the size it was given at and the size it is sent
// at, each once. (The terminal chat's 📎 line: TestChatInATerminal; sessions show: memory's markdown test.)
func TestAttachedImageSizesGivenAndSent(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	shot := testkit.WritePNG(t, filepath.Join(dir, "shot.png"), 96, 64, 0)
	given, _ := os.ReadFile(shot)
	// The tiny projector encodes 32 px on the shorter side: 96×64 goes as 48×32.
	sizes := sizesAs48x32(t, given)

	code, out, errOut := visorExit(t, "/image "+shot+"\nwhat is it?\n/quit\n",
		"chat", "--model", chat, "--mmproj", proj, "--no-store", "--plan", "off")
	if code != 0 || strings.TrimSpace(lastLine(out)) != "Hi!" {
		t.Fatalf("chat: exit %d, stdout %q\n%s", code, out, errOut)
	}
	if want := "(attached " + shot + " " + sizes + "; encoding it now)"; !strings.Contains(errOut, want) {
		t.Errorf("chat says\n%s\nwant %q", errOut, want)
	}
	if n := strings.Count(errOut, images.Size(len(given))); n != 1 {
		t.Errorf("chat names the given size %d times, want once:\n%s", n, errOut)
	}

	w := startWeb(t, []string{"--model", chat, "--mmproj", proj, "--no-store", "--plan", "off"})
	defer w.close(t)
	resp, b := w.post(t, "/api/sessions", "application/json", []byte("{}"))
	var created struct{ Session string }
	if err := json.Unmarshal(b, &created); err != nil || resp.StatusCode != 200 {
		t.Fatalf("create chat: %d %s", resp.StatusCode, b)
	}
	resp, b = w.post(t, "/api/sessions/"+created.Session+"/attach", "image/png", given)
	var att struct{ Size string }
	if err := json.Unmarshal(b, &att); err != nil || resp.StatusCode != 200 || att.Size != sizes {
		t.Errorf("web attach: %d %s, want size %q", resp.StatusCode, b, sizes)
	}
}

// sizesAs48x32 is what intake makes of a 96×64 PNG for the tiny projector: "96×64 N KB → 48×32 M KB".
func sizesAs48x32(t *testing.T, given []byte) string {
	t.Helper()
	im, err := images.Limits{Fit: func(w, h int) (int, int) { return w / 2, h / 2 }}.Check(given)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("96×64 %s → 48×32 %s", images.Size(len(given)), images.Size(len(im.Data)))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
