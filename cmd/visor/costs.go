package main

import (
	"sync"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/session"
)

// launchedEngine is what the launcher last started, so the session service can name its cost model.
type launchedEngine struct {
	mu   sync.Mutex
	info session.EngineCosts
	ok   bool
}

// set records a launch (launch.Options.OnStart): its typed placement names and seeds its costs; the plan's mode
// is its profile; a GPU warm-up's image measures the one-time pipeline compile.
func (l *launchedEngine) set(st launch.Started) {
	info := session.EngineCosts{Key: st.CostKey(), EncodesOnCPU: st.EncodesOnCPU(), Defaults: st.DefaultCosts(),
		Profile: st.Profile()}
	if st.ProjectorOnGPU {
		// The warm-up's long prompt also compiles kernels, so it is no measure of prompt speed and is left out.
		info.FirstImage, info.FirstImageTokens = st.Warmup.Image, st.Warmup.ImagePromptTokens
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info, l.ok = info, true
}

// costs is session.Config.EngineCosts: the engine the launcher started last is the one ready.
func (l *launchedEngine) costs(conductor.Ready) (session.EngineCosts, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info, l.ok
}

// projectorTokens is how many prompt tokens an image takes with the projector (its own resize rule), or nil
// when it is unknown (the cost model then estimates).
func projectorTokens(p *vram.Projector) func(w, h int) int {
	if p == nil {
		return nil
	}
	return func(w, h int) int { return p.ImageTokens(w, h) }
}

// StoredModel is one engine's stored cost model, or why it cannot be read.
