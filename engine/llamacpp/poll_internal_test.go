package llamacpp

import (
	"testing"
	"time"
)

// TestHealthPoll: /health is checked every 20 ms for the first 2 s (a small model's load, which a swap waits
// for, is seen within 20 ms of its end), then less and less often, never more than 250 ms apart.
func TestHealthPoll(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ elapsed, prev, want time.Duration }{
		{0, 0, 20 * ms},
		{150 * ms, 20 * ms, 20 * ms},
		{1999 * ms, 20 * ms, 20 * ms},
		{2 * time.Second, 20 * ms, 40 * ms},
		{3 * time.Second, 160 * ms, 250 * ms},
		{time.Minute, 250 * ms, 250 * ms},
	} {
		if got := healthPoll(c.elapsed, c.prev); got != c.want {
			t.Errorf("after %s (last wait %s): %s, want %s", c.elapsed, c.prev, got, c.want)
		}
	}
}
