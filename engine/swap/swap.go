// Package swap decides ahead of time how the engine should handle the images an agent is about to send: which
// launch profile serves the coming turns fastest (MTP with the vision encoder swapped in per image run, vision
// resident without MTP, vision on the CPU, …), and whether to prefill a turn's images before its request so the
// swap and the encode leave the critical path. It is pure arithmetic over measured costs and the agent's
// lookahead; the agent (Agent.Prefill) and the supervisor (a relaunch in another mode) carry the decisions out.
package swap

import (
	"fmt"
	"sort"
	"time"
)

// Profile is a launch profile of the engine, named like the VRAM planner's modes.
type Profile string

// Profiles the scheduler compares. The VRAM plan says which of them fit.
const (
	Resident    Profile = "resident"      // MTP and projector both on the GPU (only when they fit together)
	MTPSwap     Profile = "mtp-swap"      // projector swapped with the MTP draft context for each run of images
	VisionNoMTP Profile = "vision-no-mtp" // projector resident, no speculative decoding
	VisionCPU   Profile = "vision-cpu"    // MTP on the GPU, images encoded on the CPU
	TextOnly    Profile = "text-only"     // no projector: cannot take images at all
)

// Costs are the engine's measured (or configured) costs. The defaults are the seed system's numbers.
type Costs struct {
	SwapIn, SwapOut time.Duration // one MTP↔vision swap, paid per run of adjacent un-cached images
	EncodeGPU       time.Duration // per image token on the GPU
	EncodeCPU       time.Duration // per image token on the CPU
	TokPerSecMTP    float64       // generation speed with MTP speculation
	TokPerSecPlain  float64       // without speculation
	Restart         time.Duration // relaunching the engine in another profile (model load)
}

// SeedCosts are the seed system's measurements on a 24 GB GPU (engine-notes §4): swap 213 ms in and 540 ms out,
// Qwen3.6-35B-A3B at 250 tokens/s with MTP; ~1.5 s to encode a large image on the GPU and ~45 s on the CPU (about
// 1,000 image tokens); 136 tokens/s without speculation (Gemma 4's measured ratio, the only one published); a
// model load of about 20 s.
var SeedCosts = Costs{
	SwapIn: 213 * time.Millisecond, SwapOut: 540 * time.Millisecond,
	EncodeGPU: 1500 * time.Microsecond, EncodeCPU: 45 * time.Millisecond,
	TokPerSecMTP: 250, TokPerSecPlain: 136, Restart: 20 * time.Second,
}

// Outlook is what the agent expects over the coming turns.
type Outlook struct {
	ImageRuns   int // runs of adjacent new images (each costs one swap in MTPSwap)
	ImageTokens int // their total image tokens
	GenTokens   int // tokens the model will generate
	// Idle is time before the requests during which the engine would otherwise wait (the user typing after
	// attaching a screenshot, a slow tool running after an image-returning one finished). A prefill spends it on
	// swaps and encodes instead of the critical path.
	Idle time.Duration
}

// Cost is the time on the critical path of serving o in profile p, and whether p can serve it at all.
func Cost(p Profile, c Costs, o Outlook) (time.Duration, bool) {
	gen := func(tps float64) time.Duration {
		if tps <= 0 || o.GenTokens == 0 {
			return 0
		}
		return time.Duration(float64(o.GenTokens) / tps * float64(time.Second))
	}
	enc := func(perToken time.Duration) time.Duration { return time.Duration(o.ImageTokens) * perToken }
	// Image work overlaps with idle time when prefilled; generation never does.
	hidden := func(d time.Duration) time.Duration { return max(0, d-o.Idle) }
	swaps := time.Duration(o.ImageRuns) * (c.SwapIn + c.SwapOut)
	switch p {
	case Resident:
		return gen(c.TokPerSecMTP) + hidden(enc(c.EncodeGPU)), true
	case MTPSwap:
		return gen(c.TokPerSecMTP) + hidden(swaps+enc(c.EncodeGPU)), true
	case VisionNoMTP:
		return gen(c.TokPerSecPlain) + hidden(enc(c.EncodeGPU)), true
	case VisionCPU:
		return gen(c.TokPerSecMTP) + hidden(enc(c.EncodeCPU)), true
	case TextOnly:
		return gen(c.TokPerSecMTP), o.ImageTokens == 0
	}
	return 0, false
}

// Decision is the scheduler's verdict for the coming turns.
type Decision struct {
	Profile Profile
	// Switch is true when the engine should be relaunched in Profile: the expected saving beats the restart.
	Switch bool
	// Prefill is true when images are coming and there is idle time to encode them in ahead of the request.
	Prefill bool
	// Expected is the critical-path time in Profile; Saving what it gains over staying (net of the restart).
	Expected, Saving time.Duration
	Reason           string
}

// Decide picks the profile for o among those available (the ones the VRAM plan says fit), starting from current.
// It switches only when the saving over the outlook exceeds the restart cost, so a single screenshot does not
// bounce a 20 s model load; it must switch when current cannot take the images at all.
func Decide(current Profile, available []Profile, c Costs, o Outlook) (Decision, error) {
	type option struct {
		p    Profile
		cost time.Duration
	}
	var opts []option
	curCost, curOK := time.Duration(0), false
	for _, p := range available {
		cost, ok := Cost(p, c, o)
		if !ok {
			continue
		}
		opts = append(opts, option{p, cost})
		if p == current {
			curCost, curOK = cost, true
		}
	}
	if len(opts) == 0 {
		return Decision{}, fmt.Errorf("swap: none of the available profiles %v can take %d image tokens: "+
			"start the engine with a vision projector (--mmproj)", available, o.ImageTokens)
	}
	// Stable order keeps ties on the caller's preference order (the plan's).
	sort.SliceStable(opts, func(i, j int) bool { return opts[i].cost < opts[j].cost })
	best := opts[0]
	if curOK && curCost == best.cost {
		best = option{current, curCost} // a tie is no reason to move
	}
	d := Decision{Profile: current, Expected: curCost, Prefill: o.ImageTokens > 0 && o.Idle > 0}
	switch {
	case !curOK:
		d.Profile, d.Switch, d.Expected = best.p, true, best.cost
		d.Reason = fmt.Sprintf("%s cannot take the coming images; %s is the fastest that can", current, best.p)
	case best.p != current && curCost-best.cost > c.Restart:
		d.Profile, d.Switch, d.Expected, d.Saving = best.p, true, best.cost, curCost-best.cost-c.Restart
		d.Reason = fmt.Sprintf("%s saves %s over %s, more than the %s restart", best.p,
			(curCost - best.cost).Round(time.Millisecond), current, c.Restart)
	case best.p != current:
		d.Reason = fmt.Sprintf("%s would save %s, less than the %s restart: staying on %s", best.p,
			(curCost - best.cost).Round(time.Millisecond), c.Restart, current)
	default:
		d.Reason = fmt.Sprintf("%s is already the fastest", current)
	}
	return d, nil
}
