package vram

// MinUsefulCtx is the smallest reduced context worth launching: below it an agent's system prompt and tool list
// alone fill the window, so failing at launch (with the plan's advice) beats a server that fails on every turn.
const MinUsefulCtx = 4096

// preference ranks the modes for launch, best first:
//
//  1. resident: vision and MTP both on the GPU, nothing given up;
//  2. mtp-swap: still vision and MTP, paying a short swap only on turns that carry a new image;
//  3. vision-cpu: keeps MTP's decode speed for text and keeps vision, but image encodes run on the CPU (slow);
//  4. vision-no-mtp: keeps fast image encodes but gives up speculation, so every token is slower (docs/engine-notes.md
//     §4: 136 vs 251 t/s for Gemma 4 26B), which costs more in an agent loop than the occasional slow encode;
//  5. text-only: loses vision, which is given up last because a model that cannot see breaks image tasks
//     outright rather than making them slower.
//
// With several GPUs (PlanDevices) the placements that spread one card's load rank around resident:
// projector-apart first (resident's speed, and the vision encoder's buffers, which grow with the image, no
// longer share the model's card), then resident, then draft-apart and layer-split (a hop between cards on every
// token), all ahead of mtp-swap's pause on each image.
var preference = map[Mode]int{ModeProjectorApart: 0, ModeResident: 1, ModeDraftApart: 2, ModeSplit: 3,
	ModeSwap: 4, ModeVisionCPU: 5, ModeVisionNoMTP: 6, ModeTextOnly: 7}

// LaunchCtx is the context p's Args start the server with: the requested one when the mode fits, otherwise the
// largest that fits (0 when none does).
func (p ModePlan) LaunchCtx() int {
	if p.Fits {
		return p.Ctx
	}
	return p.MaxCtx
}

// Candidates returns the modes to try at launch, best first: every available mode that fits at the requested
// context, in the preference order above, then every available mode that fits only at a reduced context (at
// least MinUsefulCtx; its Args already use MaxCtx), in the same order. Keeping the context the user asked for
// comes before keeping a mode's features, because a shorter window silently truncates long tasks while a slower
// or text-only mode fails visibly. Unavailable modes (mtp-swap on an upstream server) are never candidates.
// The list is empty when nothing fits; the launcher then has nothing to try and should show the plan.
func (r Result) Candidates() []ModePlan {
	var full, reduced []ModePlan
	for _, p := range r.Modes {
		switch {
		case !p.Available:
		case p.Fits:
			full = append(full, p)
		case p.MaxCtx >= MinUsefulCtx:
			reduced = append(reduced, p)
		}
	}
	rank := preference
	if r.Projector == nil && len(r.Devices) > 1 {
		rank = noVisionPreference
	}
	if r.Prefer != "" {
		// A deliberate choice (the swap scheduler's relaunch) goes first; the others stay as fallbacks.
		pref := map[Mode]int{r.Prefer: -1}
		for m, v := range rank {
			if m != r.Prefer {
				pref[m] = v
			}
		}
		rank = pref
	}
	sortByPreference(full, rank)
	sortByPreference(reduced, rank)
	return append(full, reduced...)
}

// noVisionPreference ranks a multi-device plan without a projector: text-only is then the whole model on one
// card, which is resident in all but name, so it comes before the splits.
var noVisionPreference = map[Mode]int{ModeTextOnly: 0, ModeDraftApart: 1, ModeSplit: 2}

// Recommended is the first candidate: the mode visor starts with under --plan auto.
func (r Result) Recommended() (ModePlan, bool) {
	c := r.Candidates()
	if len(c) == 0 {
		return ModePlan{}, false
	}
	return c[0], true
}

// sortByPreference is an insertion sort: at most eight modes, and stable for modes the table does not rank.
func sortByPreference(ps []ModePlan, order map[Mode]int) {
	rank := func(m Mode) int {
		if r, ok := order[m]; ok {
			return r
		}
		return len(order)
	}
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && rank(ps[j].Mode) < rank(ps[j-1].Mode); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}
