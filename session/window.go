package session

import (
	"sort"
	"sync"
	"time"

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
	// costs are the recent requests' overheads over their images, for the measured per-image cost.
	costs []swap.RequestCost
}

// recentRequests is how many requests the per-image cost is fitted over.
const recentRequests = 16

// imageWindow is the window of requests to the engine launch r: the configured one, or the cost model's choice
// for this engine's profile, context and image size.
func (s *Service) imageWindow(r conductor.Ready, p llamacpp.Props) agent.ImageWindow {
	if w, ok := s.configuredWindow(); ok {
		return w
	}
	w := &s.windows
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen == r.Generation && w.gen != 0 {
		return w.chosen
	}
	costs := swap.H200Costs() // §9's numbers until this engine's own are known
	if c, ok := s.Costs(); ok {
		costs = c // this engine's measured model, its per-image request cost included (noteRequests)
	} else if sched := s.scheduler(); sched != nil {
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

// planCut is swap.PlanCut with this engine's costs and profile: whether a window cut's re-evaluation is done
// ahead of the request that cuts.
func (s *Service) planCut(n swap.CutNeeds) swap.CutPlan {
	costs := swap.H200Costs()
	if c, ok := s.Costs(); ok {
		costs = c
	} else if sched := s.scheduler(); sched != nil {
		costs = sched.Costs
	}
	if n.Profile == "" {
		n.Profile = s.currentProfile()
	}
	return swap.PlanCut(costs, n)
}

// configuredWindow is the window the config or agent file sets, if it sets one (off, or a keep count).
func (s *Service) configuredWindow() (agent.ImageWindow, bool) {
	switch set := s.cfg.Agent.ImageWindow; {
	case set.Off:
		return agent.ImageWindow{}, true
	case set.Keep > 0:
		return agent.ImageWindow{Keep: set.Keep, Batch: set.Batch}, true
	}
	return agent.ImageWindow{}, false
}

// currentWindow is the window of the latest launch's requests: the configured one, else the one chosen for it
// (off until a launch has been chosen for).
func (s *Service) currentWindow() agent.ImageWindow {
	if w, ok := s.configuredWindow(); ok {
		return w
	}
	w := &s.windows
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.chosen
}

// cutPlanLocked is the scheduler's plan for the image window's cut at this session's next message: the images
// it is expected to carry (as many as the last user message that had any; how likely from the last four user
// messages) and their lead (the median of the recent images' leads) against what the cut would re-evaluate.
// Called with s.mu held.
func (s *Session) cutPlanLocked() swap.CutPlan {
	w := s.svc.currentWindow()
	if !w.On() {
		return swap.CutPlan{Reason: "no image window"}
	}
	images, users, with, expect := 0, 0, 0, 0
	for i := len(s.history) - 1; i >= 0; i-- {
		m := s.history[i]
		images += len(m.Images)
		if m.Role != "user" || users == 4 {
			continue
		}
		users++
		if len(m.Images) > 0 {
			with++
			if expect == 0 {
				expect = len(m.Images)
			}
		}
	}
	if users == 0 || expect == 0 {
		return swap.CutPlan{Reason: "no user message with images yet"}
	}
	var leads []time.Duration
	for i := len(s.records) - 1; i >= 0 && len(leads) < 4; i-- {
		for _, im := range s.records[i].Images {
			leads = append(leads, im.Lead)
		}
	}
	lead := time.Duration(0)
	if len(leads) > 0 {
		sort.Slice(leads, func(i, j int) bool { return leads[i] < leads[j] })
		lead = leads[len(leads)/2]
	}
	return s.svc.planCut(swap.CutNeeds{Window: swap.Window{Keep: w.Keep, Batch: w.Batch}, Images: images,
		Expected: expect, Sure: float64(with) / float64(users), Lead: lead})
}

// noteRequests measures the turn's requests (added, after history): each one's time to first token outside the
// server's prompt evaluation against the images it carried, fitted over the recent requests into the cost
// model's per-image request cost (swap.CachedImageCost), which the next launch's window is chosen from.
func (s *Service) noteRequests(history, added []agent.Message) {
	win := s.currentWindow()
	var pts []swap.RequestCost
	total := countImages(history)
	for _, m := range added {
		if m.Role == "assistant" && m.Timings != nil && m.TTFT > 0 {
			tm := m.Timings
			pts = append(pts, swap.OverheadOf(total-win.Dropped(total), m.TTFT, tm.PromptMS, tm.PredictedN, tm.PredictedMS))
		}
		total += len(m.Images)
	}
	if len(pts) == 0 {
		return
	}
	w := &s.windows
	w.mu.Lock()
	w.costs = append(w.costs, pts...)
	if n := len(w.costs); n > recentRequests {
		w.costs = append([]swap.RequestCost(nil), w.costs[n-recentRequests:]...)
	}
	per, ok := swap.CachedImageCost(w.costs)
	w.mu.Unlock()
	if ok {
		s.observe(swap.Sample{CachedImage: swap.Duration(per), CachedImageFit: true})
	}
}
