package swap

import "fmt"

// The VRAM planner's placements over two or more GPUs (engine/vram: projector-apart, draft-apart, layer-split)
// keep the MTP draft context and the projector on GPUs at once, so the scheduler serves them as Resident: tokens
// at MTP's speed, images encoded on a GPU, no swap. The splits add one hop between cards per token, a few
// microseconds against a decode step of milliseconds, which these costs do not resolve; measure them into a
// Costs of their own (Key.GPU names the cards) if they turn out to differ.
var placements = map[string]Profile{"projector-apart": Resident, "draft-apart": Resident, "layer-split": Resident}

// PlacementProfile is the profile the scheduler serves a VRAM plan's mode as: the profile of that name, or
// Resident for a multi-GPU placement.
func PlacementProfile(mode string) (Profile, error) {
	if p, ok := placements[mode]; ok {
		return p, nil
	}
	p, err := ParseProfile(mode)
	if err != nil {
		return "", fmt.Errorf("swap: mode %q is neither a profile nor a multi-GPU placement: %w", mode, err)
	}
	return p, nil
}
