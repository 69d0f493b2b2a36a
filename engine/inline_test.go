package engine

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// conversation builds a request of n turns, each with one image and text, through AddImage (cache non-nil) or
// ImagePart (nil).
func conversation(cache *ImageCache, images [][]byte, text string) Request {
	var r Request
	for i, im := range images {
		var part openai.ChatMessagePart
		if cache != nil {
			part = r.AddImage(cache, "image/png", im)
		} else {
			part = ImagePart("image/png", im)
		}
		r.Messages = append(r.Messages, openai.ChatCompletionMessage{Role: "user", MultiContent: []openai.ChatMessagePart{
			part, {Type: openai.ChatMessagePartTypeText, Text: fmt.Sprintf("\nturn %d: %s", i, text)}}},
			openai.ChatCompletionMessage{Role: "assistant", Content: "ok <b>&</b>"})
	}
	slot := 1
	r.Extra.IDSlot = &slot
	return r
}

// TestCachedImageBodyIsTheSame: a body built from cached image JSON is byte for byte the body go-openai's
// marshal and the field merge make, so the server sees the same request (and its cache the same prefix).
func TestCachedImageBodyIsTheSame(t *testing.T) {
	images := [][]byte{randomBytes(t, 3000), randomBytes(t, 10), randomBytes(t, 70000)}
	cache := NewImageCache(0)
	for round := range 2 { // the second round takes every image from the cache
		want, err := json.Marshal(conversation(nil, images, "same text").ChatCompletionRequest)
		if err != nil {
			t.Fatal(err)
		}
		slot := 1
		want, err = mergeFields(want, Extra{IDSlot: &slot}.fields())
		if err != nil {
			t.Fatal(err)
		}
		got, err := chatBody(conversation(cache, images, "same text"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: the body differs from the plain marshal:\n got %.300s\nwant %.300s", round, got, want)
		}
	}
	if cache.Len() != len(images) {
		t.Errorf("cache holds %d images, want %d", cache.Len(), len(images))
	}
}

// TestPlaceholderCannotBeForged: conversation text that looks like a placeholder stays text, and an image part
// whose URL was changed after AddImage is sent with its new URL, not the cached one.
func TestPlaceholderCannotBeForged(t *testing.T) {
	cache := NewImageCache(0)
	im := randomBytes(t, 2000)
	r := conversation(cache, [][]byte{im}, "visor-image-0000000000000000-0")
	r.Messages = append(r.Messages, openai.ChatCompletionMessage{Role: "user", Content: "visor-image-0000000000000000-0"})
	body, err := chatBody(r)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), "visor-image-0000000000000000-0"); n != 2 {
		t.Errorf("look-alike text appears %d times in the body, want 2 (untouched)", n)
	}
	changed := conversation(cache, [][]byte{im}, "x")
	changed.Messages[0].MultiContent[0].ImageURL = &openai.ChatMessageImageURL{URL: "data:image/png;base64,QUJD"}
	body, err = chatBody(changed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"url":"data:image/png;base64,QUJD"`) || strings.Contains(string(body), "visor-image-") {
		t.Errorf("a changed URL must go out as changed: %.200s", body)
	}
}

// TestImageCacheBound: the cache keeps at most its bound, evicting the least recently used image, and an image
// evicted or too large still encodes correctly.
func TestImageCacheBound(t *testing.T) {
	a, b, c := randomBytes(t, 3000), randomBytes(t, 3000), randomBytes(t, 3000)
	one := encodeInline(imageKey{mime: "image/png"}, a).cost()
	cache := NewImageCache(2*one + 1)
	cache.get("image/png", a)
	cache.get("image/png", b)
	cache.get("image/png", a) // a is now the most recent
	cache.get("image/png", c) // evicts b
	if cache.Len() != 2 {
		t.Fatalf("holds %d, want 2", cache.Len())
	}
	if _, ok := cache.byKey[imageKey{p: &b[0], n: len(b), mime: "image/png"}]; ok {
		t.Error("b was the least recently used and should be gone")
	}
	big := randomBytes(t, 8000)
	in := cache.get("image/png", big)
	if want := ImagePart("image/png", big).ImageURL.URL; in.url != want {
		t.Error("an image over the bound must still encode")
	}
	if cache.size > cache.max {
		t.Errorf("size %d over the bound %d", cache.size, cache.max)
	}
}

// BenchmarkRequestBody is visor's own share of a request's cost per image of the history: the body of a
// conversation with n screenshot-sized (55 KB, incompressible) images, encoded every request (plain) or with the
// images' JSON cached (cached). per-image-ratio is cached's cost per history image over plain's, measured in the
// same run.
func BenchmarkRequestBody(b *testing.B) {
	const n = 16
	images := make([][]byte, n)
	for i := range images {
		images[i] = randomBytes(b, 55_000)
	}
	var per [2]float64
	for k, name := range []string{"plain", "cached"} {
		b.Run(name, func(b *testing.B) {
			var cache *ImageCache
			if k == 1 {
				cache = NewImageCache(0)
			}
			for b.Loop() {
				if _, err := chatBody(conversation(cache, images, "what changed?")); err != nil {
					b.Fatal(err)
				}
			}
			per[k] = float64(b.Elapsed().Nanoseconds()) / float64(b.N) / n
			b.ReportMetric(per[k]/1000, "µs/image")
		})
	}
	if per[0] > 0 {
		b.Logf("per-image-ratio cached/plain = %.3f", per[1]/per[0])
	}
}
