package engine

import (
	"bytes"
	"container/list"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// ImageCache keeps, for each image a conversation sends, its data URL and that URL as a JSON string, made once.
// Every request re-sends every image of the history; without the cache each one is base64-encoded and then
// escaped into the JSON body again (~0.25 ms for a 55 KB screenshot on this project's CI machine, megabytes of
// work per request for a long session), all on the request's critical path.
//
// An image is known by its bytes' identity (the backing array and length of its Data slice), not by a hash of
// them, so a lookup costs nothing per byte: callers hand in the same slice every turn (a conversation's history
// keeps them), and image bytes are never changed once taken in. The cache holds the slice, so its address cannot
// be reused by another image while it is cached. It is bounded by the bytes it keeps and evicts the least
// recently used images first. It is safe for concurrent use.
type ImageCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	byKey map[imageKey]*list.Element
	lru   list.List // of *Inline, most recent first
}

type imageKey struct {
	p    *byte
	n    int
	mime string
}

// Inline is one cached image: its data URL and the same as a JSON string.
type Inline struct {
	key  imageKey
	data []byte // held so the key's address stays this image's
	url  string
	json []byte
}

// DefaultImageCacheBytes bounds an ImageCache made with size 0: a session holds up to 256 MiB of images, which
// take about 2.7 times that as URL and JSON string.
const DefaultImageCacheBytes = 768 << 20

// NewImageCache returns a cache keeping at most maxBytes of encoded images (DefaultImageCacheBytes when 0).
func NewImageCache(maxBytes int64) *ImageCache {
	if maxBytes <= 0 {
		maxBytes = DefaultImageCacheBytes
	}
	return &ImageCache{max: maxBytes, byKey: map[imageKey]*list.Element{}}
}

// get returns the cached encoding of data, making it on a miss.
func (c *ImageCache) get(mime string, data []byte) *Inline {
	if len(data) == 0 {
		return encodeInline(imageKey{mime: mime}, data)
	}
	k := imageKey{p: &data[0], n: len(data), mime: mime}
	c.mu.Lock()
	if e, ok := c.byKey[k]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*Inline)
	}
	c.mu.Unlock()
	in := encodeInline(k, data) // outside the lock: a large image takes milliseconds
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		return e.Value.(*Inline)
	}
	cost := in.cost()
	if cost > c.max {
		return in // too large to keep; still correct, just not cached
	}
	for c.size+cost > c.max {
		old := c.lru.Back()
		o := old.Value.(*Inline)
		c.lru.Remove(old)
		delete(c.byKey, o.key)
		c.size -= o.cost()
	}
	c.byKey[k] = c.lru.PushFront(in)
	c.size += cost
	return in
}

func (in *Inline) cost() int64 { return int64(len(in.url) + len(in.json)) }

func encodeInline(k imageKey, data []byte) *Inline {
	url := "data:" + k.mime + ";base64," + base64.StdEncoding.EncodeToString(data)
	js, _ := json.Marshal(url) // a string always marshals
	return &Inline{key: k, data: data, url: url, json: js}
}

// Len is how many images the cache holds.
func (c *ImageCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// AddImage returns the content part for an image, as ImagePart would, and notes it in r so that the request's
// body takes the image's JSON from cache (made once per image) instead of encoding its data URL again. With a nil
// cache it is ImagePart. Parts must be added in the order the messages hold them.
func (r *Request) AddImage(cache *ImageCache, mime string, data []byte) openai.ChatMessagePart {
	if cache == nil {
		return ImagePart(mime, data)
	}
	in := cache.get(mime, data)
	r.inline = append(r.inline, in)
	return openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: in.url}}
}

// chatBody is the JSON body of req's chat request, extras merged: the body is marshalled with a short
// placeholder in place of each image noted by AddImage, and the images' cached JSON is spliced in after, so
// neither the marshal nor the merge reads the image bytes. A part whose URL is no longer the noted one (changed
// after AddImage) is marshalled as usual.
func chatBody(req Request) ([]byte, error) {
	cr, spliced, err := withPlaceholders(req)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(cr)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	if f := req.Extra.fields(); len(f) > 0 {
		if body, err = mergeFields(body, f); err != nil {
			return nil, err
		}
	}
	return splice(body, spliced)
}

// placed is one image part replaced by a placeholder.
type placed struct {
	token []byte // the placeholder as it appears in the body, quotes included
	in    *Inline
}

// withPlaceholders returns req's chat request with each noted image part's URL replaced by a placeholder that
// carries a random nonce, so no text of the conversation (a web page, a tool's output) can make one up.
func withPlaceholders(req Request) (openai.ChatCompletionRequest, []placed, error) {
	cr := req.ChatCompletionRequest
	if len(req.inline) == 0 {
		return cr, nil, nil
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return cr, nil, fmt.Errorf("encode request: %w", err)
	}
	prefix := "visor-image-" + hex.EncodeToString(nonce[:]) + "-"
	var out []placed
	next := 0
	msgs := cr.Messages
	copied := false
	for i := range msgs {
		var parts []openai.ChatMessagePart
		for j, p := range msgs[i].MultiContent {
			if next >= len(req.inline) {
				break
			}
			if p.Type != openai.ChatMessagePartTypeImageURL || p.ImageURL == nil || p.ImageURL.URL != req.inline[next].url {
				continue
			}
			if !copied {
				msgs = append([]openai.ChatCompletionMessage(nil), msgs...)
				copied = true
			}
			if parts == nil {
				parts = append([]openai.ChatMessagePart(nil), msgs[i].MultiContent...)
			}
			token := fmt.Sprintf("%s%d", prefix, len(out))
			u := *p.ImageURL
			u.URL = token
			parts[j].ImageURL = &u
			out = append(out, placed{token: []byte(`"` + token + `"`), in: req.inline[next]})
			next++
		}
		if parts != nil {
			msgs[i].MultiContent = parts
		}
	}
	cr.Messages = msgs
	return cr, out, nil
}

// splice puts each image's JSON where its placeholder is, in order.
func splice(body []byte, ps []placed) ([]byte, error) {
	if len(ps) == 0 {
		return body, nil
	}
	n := len(body)
	for _, p := range ps {
		n += len(p.in.json) - len(p.token)
	}
	out := make([]byte, 0, n)
	rest := body
	for _, p := range ps {
		i := bytes.Index(rest, p.token)
		if i < 0 {
			return nil, fmt.Errorf("encode request: image placeholder %s missing from the body", p.token)
		}
		out = append(append(out, rest[:i]...), p.in.json...)
		rest = rest[i+len(p.token):]
	}
	return append(out, rest...), nil
}
