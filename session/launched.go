package session

import (
	"sync"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/launch"
)

// LastLaunch remembers what the launcher last started, so the service can name its cost model: Started is
// launch.Options.OnStart and Costs is Config.EngineCosts (the engine the launcher started last is the one ready).
type LastLaunch struct {
	mu   sync.Mutex
	info EngineCosts
	ok   bool
}

// Started records a launch.
func (l *LastLaunch) Started(st launch.Started) {
	info := EngineCostsOf(st)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info, l.ok = info, true
}

// Costs is the cost model of the engine last started, if one was.
func (l *LastLaunch) Costs(conductor.Ready) (EngineCosts, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info, l.ok
}

// EngineCostsOf names a launch's cost model: its typed placement gives the key and the seed costs, the plan's
// mode its profile, and a GPU warm-up's image measures the one-time pipeline compile.
func EngineCostsOf(st launch.Started) EngineCosts {
	info := EngineCosts{Key: st.CostKey(), EncodesOnCPU: st.EncodesOnCPU(), Defaults: st.DefaultCosts(),
		Profile: st.Profile()}
	if st.ProjectorOnGPU {
		// The warm-up's long prompt also compiles kernels, so it is no measure of prompt speed and is left out.
		info.FirstImage, info.FirstImageTokens = st.Warmup.Image, st.Warmup.ImagePromptTokens
	}
	return info
}
