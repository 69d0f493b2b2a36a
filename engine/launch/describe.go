package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/engine/llamacpp"
)

// Describe writes which llama-server visor would run (server, or the one it finds) and what it supports: its
// version, speculative types, projector placement flags and the devices it can offload to; `visor engine`.
func Describe(ctx context.Context, server string, asJSON bool, stdout io.Writer) error {
	f, err := ServerFlags(ctx, server)
	if err != nil {
		return err
	}
	bin := f.Binary
	// What the server itself can offload to: no device means every model runs on the CPU.
	devs, derr := llamacpp.ListDevices(ctx, bin)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		out := map[string]any{"binary": bin, "version": f.Version, "spec_types": f.SpecTypes,
			"mmproj_gpu_swap": f.MMProjGPUSwap(), "mmproj_offload": f.Has("--no-mmproj-offload"), "flags": len(f.Names),
			"devices": devs}
		if derr != nil {
			out["devices_error"] = derr.Error()
		}
		return enc.Encode(out)
	}
	fmt.Fprintf(stdout, "llama-server:     %s\n%s\nspec types:       %v\nmmproj-gpu-swap:  %v\nmmproj offload:   %v\n",
		bin, f.Version, f.SpecTypes, f.MMProjGPUSwap(), f.Has("--no-mmproj-offload"))
	fmt.Fprint(stdout, deviceLines(devs, derr))
	return nil
}

// deviceLines renders the devices llama-server sees, or why it sees none.
func deviceLines(devs []llamacpp.Device, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("devices:          unknown (%v)\n", err)
	case len(devs) == 0:
		return "devices:          none: llama-server runs on the CPU; on a GPU machine install the GPU backend " +
			"(visor engine install --gpu vulkan --force)\n"
	}
	var b strings.Builder
	for i, d := range devs {
		label := ""
		if i == 0 {
			label = "devices:"
		}
		fmt.Fprintf(&b, "%-18s%s: %s, %d MiB free of %d MiB\n", label, d.Name, d.Description, d.FreeMiB, d.TotalMiB)
	}
	return b.String()
}
