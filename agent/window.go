package agent

import (
	"fmt"
	"strings"
)

// ImageWindow bounds the images a request carries. Every request re-sends the whole conversation, and
// llama-server decodes and hashes each image in it again before it can match its cache (~55 ms a 1080p
// screenshot on 16 cores), so without a bound a long screenshot session slows down with every image. With a
// window the most recent Keep images go out as they are and older ones are replaced in the request by a short
// text stub (ImageStub); the stored conversation keeps every byte.
//
// Older images leave Batch at a time: a request carries between Keep and Keep+Batch-1 images, and the prompt
// prefix changes (the server evaluates it again from the first new stub on) only once every Batch images, not on
// every turn. Which images are stubbed depends on nothing but the number of images in the conversation, so every
// request and every prefill of the same conversation renders the same prompt.
//
// The zero value sends every image with every request.
type ImageWindow struct {
	Keep  int `json:"keep"`
	Batch int `json:"batch"`
}

// ImageStub stands in the request for an image the window left out. It never changes: a request's prefix must
// render the same way in every later request.
const ImageStub = "[earlier image omitted]"

// On reports whether the window leaves anything out of a long conversation.
func (w ImageWindow) On() bool { return w.Keep > 0 }

// Dropped is how many of a conversation's oldest images a request that holds total images leaves out: a
// multiple of Batch, so the cut moves once every Batch images.
func (w ImageWindow) Dropped(total int) int {
	if w.Keep <= 0 || total <= w.Keep {
		return 0
	}
	b := max(w.Batch, 1)
	return (total - w.Keep) / b * b
}

// Validate says what is wrong with a window set by hand.
func (w ImageWindow) Validate() error {
	switch {
	case w.Keep < 0 || w.Batch < 0:
		return fmt.Errorf("image window keep %d, batch %d: neither can be negative (keep 0 sends every image)", w.Keep, w.Batch)
	case w.Keep == 0 && w.Batch > 0:
		return fmt.Errorf("image window batch %d without keep: set keep to the images every request carries", w.Batch)
	}
	return nil
}

func (w ImageWindow) String() string {
	if !w.On() {
		return "off (every image in every request)"
	}
	return fmt.Sprintf("the last %d images, older ones left out %d at a time", w.Keep, max(w.Batch, 1))
}

// stubbed says, per message of msgs, how many of its first images the window leaves out of the request: the
// conversation's oldest images, in prompt order (messages in order, a message's images in order). expect counts
// images the request after msgs will add: a prefill of msgs for that request renders them as it will.
func (w ImageWindow) stubbed(msgs []Message, expect int) []int {
	total := max(expect, 0)
	for _, m := range msgs {
		total += len(m.Images)
	}
	drop := min(w.Dropped(total), total-max(expect, 0))
	if drop == 0 {
		return nil
	}
	out := make([]int, len(msgs))
	for i, m := range msgs {
		n := min(drop, len(m.Images))
		out[i], drop = n, drop-n
		if drop == 0 {
			break
		}
	}
	return out
}

// stubText is what stands in the request for n omitted images.
func stubText(n int) string {
	return strings.Repeat(ImageStub, n)
}
