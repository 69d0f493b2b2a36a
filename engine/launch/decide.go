package launch

import (
	"errors"
	"fmt"

	"github.com/visorhq/visor/engine/vram"
)

// action is what a launch does.
type action int

const (
	actStart   action = iota // start llama-server by the plan (or as given)
	actRemote                // use the endpoint as it is
	actReuse                 // use a running engine advertised for the same spec, if there is one
	actRestart               // restart the crashed server at the same address, with the same arguments
)

func (a action) String() string {
	return [...]string{"start", "remote", "reuse", "restart"}[a]
}

// decideLaunch is a launch's decision: an endpoint is always used as it is; the first launch may reuse a served
// engine; after a crash (no mode asked) the last server comes back as it was; a relaunch into another mode starts
// anew by the plan, since the plan's arguments differ per mode.
func decideLaunch(endpoint, haveLast bool, mode string, reuse bool) action {
	switch {
	case endpoint:
		return actRemote
	case !haveLast && reuse:
		return actReuse
	case haveLast && mode == "":
		return actRestart
	}
	return actStart
}

// decidePlan says whether a start goes by the VRAM plan: --plan off never does; --plan auto does unless there is
// no GPU to plan for (then llama-server runs on the CPU as asked); any other failure of the plan stops the start
// with the way out.
func decidePlan(plan string, planErr error) (planned bool, err error) {
	switch plan {
	case "off":
		return false, nil
	case "auto":
	default:
		return false, fmt.Errorf("--plan %q: use auto or off", plan)
	}
	switch {
	case errors.Is(planErr, vram.ErrNoGPU):
		return false, nil
	case planErr != nil:
		return false, fmt.Errorf("--plan auto: %w (use --plan off to start without a plan)", planErr)
	}
	return true, nil
}

// needsWarmup: only a GPU start compiles kernels on its first image and long prompt; a CPU start, a remote or
// reused server, or a spec that turns it off, needs no warm-up.
func needsWarmup(st Started) bool {
	return st.Spec.Warmup && st.Remote == "" && st.GPU != ""
}
