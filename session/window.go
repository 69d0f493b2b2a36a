package session

import (
	"sync"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
)

// ImageWindow is the image window setting (agent.ImageWindow) of the config and agent files: Keep and Batch set
// by hand, Off to send every image with every request; the zero value lets the cost model choose (on by
// default: it changes nothing until a conversation holds more images than it keeps).
type ImageWindow struct {
	Off         bool
	Keep, Batch int
}

// windows remembers the window chosen for each engine launch: a window that moved with the cost model's
// updates would change every conversation's prompt, and the cache with it, so it is chosen once per launch (a
// relaunch loses the cache anyway).
type windows struct {
	mu     sync.Mutex
	gen    int
	chosen agent.ImageWindow
	why    string
	cache  *engine.ImageCache
}

// imageWindow is the window of requests to the engine launch r: the configured one, or the cost model's choice
// for this engine's profile, context and image size.
func (s *Service) imageWindow(r conductor.Ready, p llamacpp.Props) agent.ImageWindow {
	set := s.cfg.Agent.ImageWindow
	switch {
	case set.Off:
		return agent.ImageWindow{}
	case set.Keep > 0:
		return agent.ImageWindow{Keep: set.Keep, Batch: set.Batch}
	}
	w := &s.windows
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen == r.Generation && w.gen != 0 {
		return w.chosen
	}
	costs := swap.H200Costs() // §9's numbers until this engine's own are known
	if sched := s.scheduler(); sched != nil {
		costs = sched.Costs
	}
	prof := s.currentProfile()
	if !prof.Vision() {
		prof = swap.Resident
	}
	c := swap.ChooseWindow(costs, swap.WindowNeeds{Profile: prof, ContextTokens: p.NCtx})
	w.gen, w.chosen, w.why = r.Generation, agent.ImageWindow{Keep: c.Keep, Batch: c.Batch}, c.Reason
	s.cfg.Logger.Info("image window", "keep", c.Keep, "batch", c.Batch, "why", c.Reason)
	return w.chosen
}

// imageCache is the service's one cache of encoded images, shared by every turn's agent: a conversation's
// images are encoded into requests once, not on every turn.
func (s *Service) imageCache() *engine.ImageCache {
	w := &s.windows
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cache == nil {
		w.cache = engine.NewImageCache(0)
	}
	return w.cache
}
