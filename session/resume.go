package session

import (
	"context"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/memory"
)

// ProfileStore is what ResumeProfile reads: the session a reference names and the row it was stored with.
type ProfileStore interface {
	ResolveSessionID(ctx context.Context, prefix string) (string, error)
	Session(ctx context.Context, id string) (memory.Session, error)
}

// ResumeProfile is the engine profile (Config.EngineProfile) a resumed session brings: the one the session ref
// (an id or a unique prefix) was stored with, so it goes on with the same model. A command that names its own
// model (named) or resumes nothing (ref "") brings none: "". A session stored before sessions remembered their
// model has "" too.
func ResumeProfile(ctx context.Context, store ProfileStore, ref string, named bool) (string, error) {
	if ref == "" || named {
		return "", nil
	}
	id, err := store.ResolveSessionID(ctx, ref)
	if err != nil {
		return "", err
	}
	sess, err := store.Session(ctx, id)
	if err != nil {
		return "", err
	}
	return sess.EngineProfile, nil
}

// WindowOf is an agent file's (or the config's) image_window as the service takes it; nil lets the cost model
// choose.
func WindowOf(w *agentfile.ImageWindow) ImageWindow {
	if w == nil {
		return ImageWindow{}
	}
	return ImageWindow{Off: w.Off, Keep: w.Keep, Batch: w.Batch}
}
