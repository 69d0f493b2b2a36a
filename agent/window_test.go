package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/tools"
)

type nopStreamer struct{}

func (nopStreamer) ChatStream(_ context.Context, _ engine.Request) (engine.ChunkStream, error) {
	return nil, fmt.Errorf("not used")
}

func TestImageWindowDropped(t *testing.T) {
	for _, c := range []struct {
		w           ImageWindow
		total, want int
	}{
		{ImageWindow{}, 50, 0},
		{ImageWindow{Keep: 3, Batch: 4}, 3, 0},
		{ImageWindow{Keep: 3, Batch: 4}, 6, 0}, // 3 over: not yet a batch
		{ImageWindow{Keep: 3, Batch: 4}, 7, 4},
		{ImageWindow{Keep: 3, Batch: 4}, 10, 4},
		{ImageWindow{Keep: 3, Batch: 4}, 11, 8},
		{ImageWindow{Keep: 2}, 5, 3}, // batch 0 is 1: the oldest leaves on every new image
	} {
		if got := c.w.Dropped(c.total); got != c.want {
			t.Errorf("%+v.Dropped(%d) = %d, want %d", c.w, c.total, got, c.want)
		}
		if d := c.w.Dropped(c.total); c.w.On() && c.total-d < min(c.total, c.w.Keep) {
			t.Errorf("%+v keeps %d of %d images, fewer than keep", c.w, c.total-d, c.total)
		}
	}
	if err := (ImageWindow{Keep: -1}).Validate(); err == nil {
		t.Error("a negative keep passed")
	}
	if err := (ImageWindow{Batch: 3}).Validate(); err == nil {
		t.Error("batch without keep passed")
	}
}

// screenshotChat is a chat of n turns, each a user message with one image and an answer; every third turn's image
// comes from a tool instead, so both places images live in are covered.
func screenshotChat(n int) []Message {
	var msgs []Message
	for i := range n {
		im := tools.Image{MIME: "image/png", Data: []byte(fmt.Sprintf("png-%02d", i))}
		if i%3 == 2 {
			id := fmt.Sprintf("call%d", i)
			msgs = append(msgs,
				Message{Role: "user", Content: fmt.Sprintf("take screenshot %d", i)},
				Message{Role: "assistant", ToolCalls: []Call{{ID: id, Name: "screenshot", Arguments: json.RawMessage(`{}`)}}},
				Message{Role: "tool", ToolCallID: id, ToolName: "screenshot", Content: "done", Images: []tools.Image{im}})
		} else {
			msgs = append(msgs, Message{Role: "user", Content: fmt.Sprintf("what is on screen %d?", i), Images: []tools.Image{im}})
		}
		msgs = append(msgs, Message{Role: "assistant", Content: fmt.Sprintf("answer %d", i)})
	}
	return msgs
}

func rendered(t *testing.T, req engine.Request) []string {
	t.Helper()
	var out []string
	for _, m := range req.Messages {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func imageParts(req engine.Request) int {
	n := 0
	for _, m := range req.Messages {
		for _, p := range m.MultiContent {
			if p.Type == openai.ChatMessagePartTypeImageURL {
				n++
			}
		}
	}
	return n
}

// TestWindowRequests: with a window every request carries between keep and keep+batch-1 images, the stubs stand
// where the others were, the conversation itself keeps every image, and a request's messages are the previous
// request's plus the new ones except when the cut moved, once per batch.
func TestWindowRequests(t *testing.T) {
	for _, mode := range []ToolMode{Native, Raw} {
		w := ImageWindow{Keep: 3, Batch: 4}
		reg := tools.NewRegistry()
		a, err := New(Config{Model: nopStreamer{}, ImageWindow: w, Mode: mode, Tools: reg})
		if err != nil {
			t.Fatal(err)
		}
		var prev []string
		breaks := 0
		for turns := 1; turns <= 20; turns++ {
			msgs := screenshotChat(turns)
			before := fmt.Sprint(msgs)
			req := a.request(msgs)
			if fmt.Sprint(msgs) != before {
				t.Fatal("the request changed the conversation")
			}
			sent, dropped := imageParts(req), w.Dropped(turns)
			if sent != turns-dropped || sent > w.Keep+w.Batch-1 || (turns >= w.Keep && sent < w.Keep) {
				t.Errorf("mode %d, %d images: request carries %d (dropped %d)", mode, turns, sent, dropped)
			}
			body := strings.Join(rendered(t, req), "\n")
			if got := strings.Count(body, ImageStub); got != dropped {
				t.Errorf("mode %d, %d images: %d stubs, want %d", mode, turns, got, dropped)
			}
			// The newest images are the ones sent.
			if turns > 0 && !strings.Contains(imagesOf(req), base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("png-%02d", turns-1)))) {
				t.Errorf("the newest image is not in the request")
			}
			cur := rendered(t, req)
			same := len(prev) <= len(cur)
			for i := 0; same && i < len(prev)-1; i++ { // the last message is the previous answer, appended since
				same = prev[i] == cur[i]
			}
			if !same {
				breaks++
				if w.Dropped(turns) == w.Dropped(turns-1) {
					t.Errorf("mode %d: turn %d changed the prefix although the cut did not move", mode, turns)
				}
			}
			prev = cur
		}
		if breaks != 4 { // cuts at 7, 11, 15, 19 images
			t.Errorf("mode %d: the prefix changed %d times in 20 turns, want 4", mode, breaks)
		}
	}
}

func imagesOf(req engine.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		for _, p := range m.MultiContent {
			if p.ImageURL != nil {
				b.WriteString(p.ImageURL.URL)
			}
		}
	}
	return b.String()
}
