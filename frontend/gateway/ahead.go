package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/session"
)

// checkImages takes every data-URL image of a chat body through visor's image intake, so a bad one is refused
// at once, naming where it is and why, instead of after the request has waited for the engine. Images given
// by http(s) URL are left to the server. Each request carries the whole conversation, so an image passed once
// is known by its digest (seen) and not decoded again: a 1440p screenshot's check is ~30 ms, its digest ~2 ms.
func checkImages(body []byte, lim images.Limits, seen *checkedImages) error {
	var err error
	gjson.GetBytes(body, "messages").ForEach(func(mi, m gjson.Result) bool {
		m.Get("content").ForEach(func(pi, p gjson.Result) bool {
			u, ok := imageURL(p)
			if !ok {
				return true
			}
			payload, ok := base64Payload(u)
			if !ok {
				return true
			}
			where := fmt.Sprintf("messages[%d].content[%d]", mi.Int(), pi.Int())
			sum := sha256.Sum256([]byte(payload))
			if seen.has(sum) {
				return true
			}
			data, derr := base64.StdEncoding.DecodeString(payload)
			switch {
			case derr != nil:
				err = fmt.Errorf("%s: the image's data URL is not valid base64 (%w): send data:image/png;base64,<the file's bytes>", where, derr)
			default:
				if _, cerr := lim.Check(data); cerr != nil {
					err = fmt.Errorf("%s: %w", where, cerr)
				} else {
					seen.add(sum)
				}
			}
			return err == nil
		})
		return err == nil
	})
	return err
}

// checkedImages is a bounded set of the digests of images that passed intake; the oldest go first. A
// cryptographic digest, so a client cannot make a bad image collide with a good one. Safe for concurrent use.
type checkedImages struct {
	mu    sync.Mutex
	max   int
	set   map[[32]byte]struct{}
	order [][32]byte
}

func newCheckedImages(max int) *checkedImages {
	return &checkedImages{max: max, set: map[[32]byte]struct{}{}}
}

func (c *checkedImages) has(sum [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.set[sum]
	return ok
}

func (c *checkedImages) add(sum [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.set[sum]; ok {
		return
	}
	if len(c.order) >= c.max {
		delete(c.set, c.order[0])
		c.order = c.order[1:]
	}
	c.set[sum] = struct{}{}
	c.order = append(c.order, sum)
}

// imageURL is the URL of an image_url content part; ok is false for any other part.
func imageURL(p gjson.Result) (string, bool) {
	if p.Get("type").String() != "image_url" {
		return "", false
	}
	return p.Get("image_url.url").String(), true
}

// base64Payload is the base64 data of a data:…;base64, URL; ok is false for any other URL.
func base64Payload(u string) (string, bool) {
	i := strings.Index(u, ";base64,")
	if !strings.HasPrefix(u, "data:") || i < 0 {
		return "", false
	}
	return u[i+len(";base64,"):], true
}

// hasImages reports whether the last user message of a chat body carries a data-URL image: what a queued
// request can have evaluated ahead.
func hasImages(body []byte) bool {
	msgs := gjson.GetBytes(body, "messages").Array()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Get("role").String() != "user" {
			continue
		}
		found := false
		msgs[i].Get("content").ForEach(func(_, p gjson.Result) bool {
			if u, ok := imageURL(p); ok {
				_, found = base64Payload(u)
			}
			return !found
		})
		return found
	}
	return false
}

// conversationKey identifies a client's conversation by its first two messages, which every later request of
// it repeats: the slot that served it last holds its cache.
func conversationKey(body []byte) string {
	h := fnv.New64a()
	for _, p := range []string{"messages.0", "messages.1"} {
		h.Write([]byte(gjson.GetBytes(body, p).Raw))
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// startAhead reserves a spare server slot for a request that has to wait and evaluates its images there while
// it waits; nil when the policy finds no slot (see session.QueuedPrefill) or the model is not loaded.
func (g *Gateway) startAhead(ctx context.Context, md Model, req request, key string) *session.Ahead {
	// The outcome is counted before Done closes, so /metrics has it once the request is answered.
	a, why := g.engines.PrefillAhead(ctx, md.Name, key, md.APIKey, req.upstream, func(a *session.Ahead) {
		if a.Err != nil {
			if ctx.Err() == nil {
				g.cfg.Logger.Warn("gateway: queued prefill failed; the images are encoded with the request", "model", md.Name, "err", a.Err)
			}
			return
		}
		g.metrics.queuedPrefill(md.Name, a.Timings)
	})
	if a == nil {
		g.cfg.Logger.Debug("gateway: no prefill for a queued request", "model", md.Name, "why", why)
		return nil
	}
	g.cfg.Logger.Info("gateway: prefilling a queued request", "model", md.Name, "slot", a.Slot, "why", why)
	return a
}
