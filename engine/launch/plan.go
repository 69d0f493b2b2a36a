package launch

import (
	"context"
	"encoding/json"
	"io"

	"github.com/visorhq/visor/engine/vram"
)

// WritePlan writes what fits in VRAM for o's model (and projector), per launch mode, before loading anything:
// `visor plan`. The modes server offers decide which are available; devices are llama-server's names for the
// GPUs (nil: the ones server lists for o.GPU). Without a GPU the plan is for system RAM, where llama-server then
// runs.
func WritePlan(ctx context.Context, o vram.FileOptions, server string, devices []string, asJSON bool, stdout io.Writer) error {
	o.SwapSupported = SwapSupported(ctx, server)
	o.CPUFallback = true
	o.DeviceNames = devices
	if devices == nil {
		o.DeviceNames = DeviceNames(ctx, server, o.GPU, vram.NVML{})
	}
	res, err := vram.PlanFiles(ctx, o)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.WriteTable(stdout)
}
