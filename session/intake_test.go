package session

import "testing"

// TestVisionOf: only a server visor starts is known to see (with a projector) or not (without) before it loads.
func TestVisionOf(t *testing.T) {
	for _, c := range []struct {
		remote, projector bool
		want              Vision
	}{{false, true, VisionYes}, {false, false, VisionNo}, {true, false, VisionUnknown}, {true, true, VisionUnknown}} {
		if got := VisionOf(c.remote, c.projector); got != c.want {
			t.Errorf("VisionOf(remote %v, projector %v) = %v, want %v", c.remote, c.projector, got, c.want)
		}
	}
}
