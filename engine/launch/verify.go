package launch

import (
	"context"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/vram"
)

// Placement is what the load log said about a multi-device placement: the per-buffer checks, and Err when a
// buffer was not where the plan put it. Mode is empty when the started mode was a single-device one (nothing
// to check per device).
type Placement struct {
	Mode   vram.Mode
	Checks []vram.Check
	Err    error
}

// verbose is the log level at which llama-server prints each buffer's device and size (the default, 3, does
// not); multi-device attempts carry it so that their placement can be checked.
var verbose = []string{"-lv", "4"}

// StartChecked is Start that also checks a multi-device placement: it keeps the placement lines of the load log
// (a vram.LogLines observer chained before base.OnLog) and, once a mode that spreads over several devices is up,
// compares each buffer with the plan (vram.CheckPlacement). A mismatch does not stop the server, which is
// running: it is returned in Placement.Err for the caller to report, since the plan's headroom no longer holds.
func StartChecked(ctx context.Context, base llamacpp.Config, r vram.Result, report func(llamacpp.Attempt, error)) (*llamacpp.Server, llamacpp.Attempt, Placement, error) {
	var lines vram.LogLines
	next := base.OnLog
	base.OnLog = func(l string) {
		lines.Add(l)
		if next != nil {
			next(l)
		}
	}
	s, used, err := Start(ctx, base, r, report)
	if err != nil {
		return nil, used, Placement{}, err
	}
	p, ok := planFor(r, used)
	if !ok || len(p.Devices) == 0 {
		return s, used, Placement{}, nil
	}
	// The buffer lines precede the server's readiness by the whole model load, so they are in by now.
	checks, cerr := vram.CheckPlacement(p, r.Devices, vram.ParseLoadLog(lines.Lines()))
	return s, used, Placement{Mode: p.Mode, Checks: checks, Err: cerr}, nil
}

// planFor finds the candidate an attempt was made from (Attempts keeps the candidates' order and names them
// uniquely by mode and context).
func planFor(r vram.Result, a llamacpp.Attempt) (vram.ModePlan, bool) {
	cands := r.Candidates()
	for i, at := range Attempts(r) {
		if at.Name == a.Name && i < len(cands) {
			return cands[i], true
		}
	}
	return vram.ModePlan{}, false
}
