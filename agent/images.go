package agent

import (
	"fmt"
	"strings"
	"sync"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/tools"
)

// ToolImages is how the loop takes the images tools return: by the policy a user's attachments pass, since a
// tool's output (an MCP server's, a file the model chose) is as untrusted as any other input. An image it refuses
// never reaches the engine; the model reads why in the tool's result, and the turn goes on.
type ToolImages struct {
	// Limits is the one image policy (formats, bytes, pixels, the encoder's size); the zero value is the default.
	Limits images.Limits
	// MaxImages and MaxBytes bound the images of one step's tool results, which go out in one message as a
	// user's attachments do (defaults 8 and 64 MiB).
	MaxImages int
	MaxBytes  int64
	// MaxConversationBytes bounds the image bytes of the whole conversation, which are sent again with every
	// request (default 256 MiB).
	MaxConversationBytes int64
	// Refuse, when set, refuses every tool image with this reason (a model without a vision projector).
	Refuse string
}

func (p ToolImages) withDefaults() ToolImages {
	if p.MaxImages <= 0 {
		p.MaxImages = 8
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = 64 << 20
	}
	if p.MaxConversationBytes <= 0 {
		p.MaxConversationBytes = 256 << 20
	}
	return p
}

// stepImages is what one step's tool results have taken of the bounds so far; parallel calls share it.
type stepImages struct {
	mu     sync.Mutex
	images int
	bytes  int64
	held   int64 // image bytes of the conversation before the step
}

// take applies the policy to one tool result. A refused image is dropped and named in the result's text, which
// becomes an error so the model knows its call did not give what it wanted.
func (p ToolImages) take(res tools.Result, st *stepImages) tools.Result {
	if len(res.Images) == 0 {
		return res
	}
	var kept []tools.Image
	var refused []string
	if p.Refuse != "" {
		refused = append(refused, fmt.Sprintf("all %d: %s", len(res.Images), p.Refuse))
		res.Images = nil
	}
	// More images than a step may carry are refused unread: decoding 1,000 images to keep 8 would be the
	// tool's denial of service.
	if n := len(res.Images); n > p.MaxImages {
		refused = append(refused, fmt.Sprintf("images %d–%d: one step's tool results may carry at most %d images: ask for fewer",
			p.MaxImages+1, n, p.MaxImages))
		res.Images = res.Images[:p.MaxImages]
	}
	checked := make([]tools.Image, 0, len(res.Images))
	index := make([]int, 0, len(res.Images))
	for i, raw := range res.Images {
		im, err := p.Limits.Check(raw.Data)
		if err != nil {
			refused = append(refused, fmt.Sprintf("image %d: %v", i+1, err))
			continue
		}
		checked = append(checked, tools.Image{MIME: im.MIME, Data: im.Data})
		index = append(index, i)
	}
	st.mu.Lock()
	for k, im := range checked {
		size := int64(len(im.Data))
		switch {
		case st.images+1 > p.MaxImages:
			refused = append(refused, fmt.Sprintf("image %d: this step's tool results already carry %d images, the most one message may: ask for fewer",
				index[k]+1, st.images))
			continue
		case st.bytes+size > p.MaxBytes:
			refused = append(refused, fmt.Sprintf("image %d (%s): this step's tool images would pass %s for one message: ask for fewer or smaller images",
				index[k]+1, sizeOf(size), sizeOf(p.MaxBytes)))
			continue
		case st.held+st.bytes+size > p.MaxConversationBytes:
			refused = append(refused, fmt.Sprintf("image %d (%s): the conversation already holds %s of images, and its limit is %s: start a new session for more",
				index[k]+1, sizeOf(size), sizeOf(st.held+st.bytes), sizeOf(p.MaxConversationBytes)))
			continue
		}
		st.images++
		st.bytes += size
		kept = append(kept, im)
	}
	st.mu.Unlock()
	res.Images = kept
	if len(refused) == 0 {
		return res
	}
	var b strings.Builder
	b.WriteString(res.Text)
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	b.WriteString("Images this tool returned that were not shown to you:\n- " + strings.Join(refused, "\n- "))
	switch len(kept) {
	case 0:
	case 1:
		b.WriteString("\nThe other image is shown.")
	default:
		fmt.Fprintf(&b, "\nThe other %d images are shown.", len(kept))
	}
	res.Text = b.String()
	res.IsError = true
	return res
}

func sizeOf(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

func imageBytes(msgs []Message) int64 {
	var n int64
	for _, m := range msgs {
		for _, im := range m.Images {
			n += int64(len(im.Data))
		}
	}
	return n
}
