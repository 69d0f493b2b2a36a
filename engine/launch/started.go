package launch

import (
	"path/filepath"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/engine/vram"
)

// Started is what a launch started, in typed placement facts: the engine's cost model is named and seeded from
// these, never from flag strings or GPU names.
type Started struct {
	Spec Spec
	// Remote labels a server visor did not start (an endpoint, a reused engine); its speed flags and GPU are not
	// known here.
	Remote string
	// Mode is the plan's mode ("" without a plan); GPU the GPU it placed the model on ("" is the CPU);
	// ProjectorOnGPU whether the vision encoder runs there too (per the plan and the load log).
	Mode           string
	GPU            string
	ProjectorOnGPU bool
	// Args are the server's arguments (their speed flags name the cost model's key).
	Args []string
	// Warmup is the warm-up's measurements, once it ran.
	Warmup llamacpp.WarmupStats
}

// CostKey names the engine's cost model.
func (s Started) CostKey() swap.Key {
	if s.Remote != "" {
		return swap.Key{Model: s.Remote, GPU: "remote"}
	}
	k := swap.Key{Model: filepath.Base(s.Spec.Model), GPU: s.GPU, Flags: swap.FlagsKey(s.Args)}
	if s.Spec.Projector != "" {
		k.Projector = filepath.Base(s.Spec.Projector)
	}
	return k
}

// EncodesOnCPU says the engine's images are encoded on the CPU: without a GPU, or where the plan or llama.cpp
// kept the projector off it.
func (s Started) EncodesOnCPU() bool { return s.Remote == "" && !s.ProjectorOnGPU }

// Profile is the plan's mode as the scheduler's profile.
func (s Started) Profile() swap.Profile { return swap.Profile(s.Mode) }

// DefaultCosts is the cost model an engine starts from before anything is measured on it. A GPU the plan made
// everything resident on starts from §9's measurements of such an engine (an H200), whose profiles are the ones a
// resident engine can relaunch into; other GPU placements from the seed system's. An engine without a GPU has one
// profile (the projector and the model both on the CPU), so it offers only that one and the scheduler never
// relaunches it into profiles it cannot run.
func (s Started) DefaultCosts() swap.Costs {
	switch {
	case s.Remote != "":
		return swap.SeedCosts()
	case s.GPU != "" && s.Mode == string(vram.ModeResident):
		return swap.H200Costs()
	case s.GPU != "":
		return swap.SeedCosts()
	}
	c := swap.SeedCosts()
	c.Profiles = []swap.Profile{swap.TextOnly}
	if s.Spec.Projector != "" {
		c.Profiles = []swap.Profile{swap.VisionCPU}
	}
	c.Source = "seed defaults (docs/engine-notes.md §4) for an engine on the CPU, until measured"
	return c
}
