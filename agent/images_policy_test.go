package agent

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/tools"
)

func testPNG(t *testing.T, w, h int) tools.Image {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return tools.Image{MIME: "image/png", Data: b.Bytes()}
}

// TestToolImagePolicy is the intake decision without a server: the step's bounds are shared by the results of
// one step (parallel calls go out in one message), the conversation's bound counts what it already holds, a
// model without vision refuses every image, and the encoder's size (Limits.Fit) resizes as for attachments.
func TestToolImagePolicy(t *testing.T) {
	small := testPNG(t, 8, 8)
	size := int64(len(small.Data))
	three := []tools.Image{small, small, small}
	cases := []struct {
		name    string
		policy  ToolImages
		held    int64
		results [][]tools.Image // one step's results, in the order they finish
		kept    []int
		says    []string // in the last result's text
	}{
		{"within", ToolImages{}, 0, [][]tools.Image{three}, []int{3}, nil},
		{"step count shared", ToolImages{MaxImages: 4}, 0, [][]tools.Image{three, three}, []int{3, 1},
			[]string{"image 2: this step's tool results already carry 4 images", "image 3:", "The other image is shown."}},
		{"step bytes shared", ToolImages{MaxBytes: 2 * size}, 0, [][]tools.Image{{small}, three}, []int{1, 1},
			[]string{"image 2 (", "would pass " + sizeOf(2*size) + " for one message"}},
		{"conversation", ToolImages{MaxConversationBytes: 10 * size}, 9 * size, [][]tools.Image{three}, []int{1},
			[]string{"the conversation already holds"}},
		{"no vision", ToolImages{Refuse: "this model cannot see images"}, 0, [][]tools.Image{three}, []int{0},
			[]string{"all 3: this model cannot see images"}},
		{"too many, unread", ToolImages{MaxImages: 2}, 0, [][]tools.Image{append(three, tools.Image{Data: []byte("junk")})}, []int{2},
			[]string{"images 3–4: one step's tool results may carry at most 2 images"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.policy.withDefaults()
			st := &stepImages{held: c.held}
			var last tools.Result
			for i, ims := range c.results {
				last = p.take(tools.Result{Text: "ok", Images: ims}, st)
				if len(last.Images) != c.kept[i] {
					t.Errorf("result %d keeps %d images, want %d: %s", i+1, len(last.Images), c.kept[i], last.Text)
				}
			}
			if len(c.says) == 0 && (last.IsError || last.Text != "ok") {
				t.Errorf("an accepted result changed: %+v", last)
			}
			for _, s := range c.says {
				if !last.IsError || !strings.Contains(last.Text, s) {
					t.Errorf("result %q (error %v) lacks %q", last.Text, last.IsError, s)
				}
			}
		})
	}
	// An image larger than the encoder uses is resized once, here, as an attachment would be.
	p := ToolImages{Limits: images.Limits{Fit: func(w, h int) (int, int) { return w / 4, h / 4 }}}.withDefaults()
	res := p.take(tools.Result{Images: []tools.Image{testPNG(t, 64, 32)}}, &stepImages{})
	cfg, _, err := image.DecodeConfig(bytes.NewReader(res.Images[0].Data))
	if err != nil || cfg.Width != 16 || cfg.Height != 8 {
		t.Fatalf("a 64×32 tool image was sent at %d×%d (%v), want the encoder's 16×8", cfg.Width, cfg.Height, err)
	}
}
