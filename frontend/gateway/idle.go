package gateway

import (
	"io"
	"sync/atomic"
	"time"
)

// idleBody bounds the silence of an engine's event stream: when nothing arrives for d, the body is closed, which
// ends the read blocked on it, and idled says why. A hung server or a connection that stalls without closing
// then ends the client's stream with an error instead of holding it (and a slot) until the client gives up.
// d ≤ 0 sets no bound.
type idleBody struct {
	r     io.ReadCloser
	d     time.Duration
	t     *time.Timer
	fired atomic.Bool
}

func newIdleBody(r io.ReadCloser, d time.Duration) *idleBody {
	b := &idleBody{r: r, d: d}
	if d > 0 {
		b.t = time.AfterFunc(d, func() {
			b.fired.Store(true)
			_ = r.Close()
		})
	}
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 && b.t != nil && !b.fired.Load() {
		b.t.Reset(b.d)
	}
	return n, err
}

// stop ends the bound; idled reports whether it had cut the stream.
func (b *idleBody) stop() bool {
	if b.t != nil {
		b.t.Stop()
	}
	return b.fired.Load()
}
