package swap

import "testing"

// TestPlacementProfile: each multi-GPU placement of the VRAM plan is served as Resident, every single-card mode
// as the profile of its name, and an unknown name is refused.
func TestPlacementProfile(t *testing.T) {
	for mode, want := range map[string]Profile{"projector-apart": Resident, "draft-apart": Resident, "layer-split": Resident,
		"resident": Resident, "mtp-swap": MTPSwap, "vision-cpu": VisionCPU, "text-only": TextOnly} {
		if got, err := PlacementProfile(mode); err != nil || got != want {
			t.Errorf("PlacementProfile(%q) = %q, %v; want %q", mode, got, err, want)
		}
	}
	if _, err := PlacementProfile("split-everything"); err == nil {
		t.Error("an unknown mode must be refused")
	}
	if got, _ := PlacementProfile("projector-apart"); !got.Vision() || !got.Speculative() {
		t.Errorf("projector-apart must take images with MTP on: %q", got)
	}
}
