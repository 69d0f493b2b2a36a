package agent_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/internal/testimage"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/tools"
)

// requests records what the loop sends to the real server, so a test can see which images reached it.
type requests struct {
	agent.Streamer
	mu   sync.Mutex
	sent []engine.Request
}

func (r *requests) ChatStream(ctx context.Context, req engine.Request) (engine.ChunkStream, error) {
	r.mu.Lock()
	r.sent = append(r.sent, req)
	r.mu.Unlock()
	return r.Streamer.ChatStream(ctx, req)
}

// last returns the image parts and the tool messages' contents of the last request.
func (r *requests) last() (imageParts int, toolContents []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req := r.sent[len(r.sent)-1]
	for _, m := range req.Messages {
		for _, p := range m.MultiContent {
			if p.ImageURL != nil {
				imageParts++
			}
		}
		if m.Role == "tool" {
			toolContents = append(toolContents, m.Content)
		}
	}
	return imageParts, toolContents
}

type noArgs struct{}

// TestToolImagesPassIntake runs a tool returning each kind of image a tool (an MCP server, a file the model
// chose) may return through the loop against the real llama-server with the vision projector: what the image
// policy refuses becomes part of the result the model reads, never reaches the server, and the turn is answered;
// a tool returning an image and no text still sends a tool message with content, which llama-server requires.
func TestToolImagesPassIntake(t *testing.T) {
	srv := tiny(t)
	good := testkit.SeededPNG(t, 16, 16, 0)
	thousand := make([]tools.Image, 1000)
	for i := range thousand {
		thousand[i] = tools.Image{MIME: "image/png", Data: testkit.SeededPNG(t, 8, 8, i)}
	}
	cases := []struct {
		name   string
		res    tools.Result
		images int      // image parts the last request carries
		isErr  bool     // the result the model reads is an error
		says   []string // in the result's text
	}{
		{"webp", tools.Result{Images: []tools.Image{{MIME: "image/webp", Data: testimage.WebP()}}}, 0, true,
			[]string{"image 1", "WebP, which llama-server cannot decode", "convert it to a PNG"}},
		{"bomb", tools.Result{Text: "a huge one", Images: []tools.Image{{MIME: "image/png", Data: testimage.BombPNG(20000, 20000)}}}, 0, true,
			[]string{"a huge one", "20000×20000", "downscale it"}},
		{"corrupt, mislabelled", tools.Result{Images: []tools.Image{{MIME: "image/png", Data: []byte("<html>not a png</html>")}}}, 0, true,
			[]string{"not an image visor accepts", "text/html"}},
		{"a thousand", tools.Result{Text: "frames", Images: thousand}, 8, true,
			[]string{"images 9–1000", "at most 8 images", "The other 8 images are shown."}},
		{"one good, one webp", tools.Result{Images: []tools.Image{{MIME: "image/png", Data: good}, {MIME: "image/webp", Data: testimage.WebP()}}}, 1, true,
			[]string{"image 2", "WebP", "The other image is shown."}},
		{"image only", tools.Result{Images: []tools.Image{{MIME: "image/jpeg", Data: good}}}, 1, false, nil},
		{"nothing", tools.Result{}, 0, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg := tools.NewRegistry()
			register(t, reg, tools.New("shot", "takes a screenshot", func(context.Context, noArgs) (tools.Result, error) {
				return c.res, nil
			}, tools.ReturnsImages()))
			rec := &requests{Streamer: srv.Client()}
			a, err := agent.New(agent.Config{Model: rec, Tools: reg, MaxSteps: 4})
			if err != nil {
				t.Fatal(err)
			}
			var ev recorder
			f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "Look at the screen."}, ev.emit)
			if f.Err != nil || f.Reason != "answer" || f.Final.Content != "Hi!" {
				t.Fatalf("the turn did not go on to the answer: %+v", f)
			}
			calls := ev.calls()
			if len(calls) != 1 || calls[0].Call.Name != "shot" {
				t.Fatalf("calls %+v", calls)
			}
			res := calls[0].Result
			if res.IsError != c.isErr {
				t.Errorf("IsError = %v, want %v: %s", res.IsError, c.isErr, res.Text)
			}
			for _, s := range c.says {
				if !strings.Contains(res.Text, s) {
					t.Errorf("result %q lacks %q", res.Text, s)
				}
			}
			if len(res.Images) != c.images {
				t.Errorf("result keeps %d images, want %d", len(res.Images), c.images)
			}
			for _, im := range res.Images {
				if im.MIME != "image/png" {
					t.Errorf("kept image labelled %s: the label comes from the bytes, not the tool", im.MIME)
				}
			}
			parts, contents := rec.last()
			if parts != c.images {
				t.Errorf("the last request carries %d images, want %d", parts, c.images)
			}
			if len(contents) != 1 || contents[0] == "" {
				t.Errorf("tool messages %q: each must carry content", contents)
			}
		})
	}
}
