package memory

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"strings"
	"testing"
)

// Issue 22: `visor sessions show` printed the stored engine profile as the raw object it is stored as, and an
// image without its size.
func TestMarkdownShowsTheProfileAndImageSizeForAPerson(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	profile := `{"name":"qwen","Path":"/m/qwen.gguf","MMProj":"","Endpoint":"","Ctx":0,"Parallel":1,"Plan":"off","GPU":"auto","ServerArgs":["--jinja","-t","2"]}`
	sess := newSession(t, s, Session{Title: "look", EngineProfile: profile})
	img := pngBytes(t, 3, 2, color.White)
	if err := s.AppendStep(ctx, sess.ID, Step{Messages: []Message{{Role: "user", Content: "what?", Images: []Image{{Data: img}}}}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Export(ctx, sess.ID, "md", &buf, ""); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"- engine profile: name qwen, path /m/qwen.gguf, parallel 1, plan off, gpu auto, serverargs --jinja -t 2\n",
		fmt.Sprintf("*image 1: image/png, 3×2, %d bytes as sent to the model, sha256 ", len(img)),
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, `{"`) {
		t.Errorf("markdown shows the stored profile object:\n%s", md)
	}
	if got := readableProfile("mtp"); got != "mtp" {
		t.Errorf("a profile that is no object: %q, want it as stored", got)
	}
}
