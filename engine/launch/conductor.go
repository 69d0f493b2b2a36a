package launch

import (
	"context"

	"github.com/visorhq/visor/engine/conductor"
)

// NewConductor is a conductor over a launcher of spec that removes the launcher's advertisement once it has
// stopped: an engine a pool loads and unloads (the gateway's, engine/residency). Nothing starts before its first
// EnsureReady.
func NewConductor(spec Spec, o Options) *Conductor {
	l := New(spec, o)
	cfg := conductor.Config{Logger: o.Logger}
	l.Configure(&cfg)
	return &Conductor{Conductor: conductor.New(cfg), launcher: l}
}

// Conductor is NewConductor's engine.
type Conductor struct {
	*conductor.Conductor
	launcher *Launcher
}

// Close stops the server, then withdraws its advertisement.
func (c *Conductor) Close(ctx context.Context) error {
	err := c.Conductor.Close(ctx)
	c.launcher.Close()
	return err
}
