package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/visorhq/visor/engine/llamacpp"
)

// cmdEngine shows which llama-server visor would run and what it supports.
func cmdEngine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	server := fs.String("server", "", "llama-server binary to inspect")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := serverFlags(ctx, *server)
	if err != nil {
		return err
	}
	bin := f.Binary
	// What the server itself can offload to: no device means every model runs on the CPU.
	devs, derr := llamacpp.ListDevices(ctx, bin)
	if *asJSON {
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
			"(VISOR_ENGINE_GPU=vulkan VISOR_ENGINE_FORCE=1 scripts/install-engine.sh)\n"
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

// serverFlags reads what the llama-server visor would run accepts, through the --help cache on disk.
func serverFlags(ctx context.Context, server string) (llamacpp.Flags, error) {
	bin, err := llamacpp.Find(server)
	if err != nil {
		return llamacpp.Flags{}, err
	}
	return (&llamacpp.HelpCache{Dir: filepath.Join(llamacpp.InstallDir(), "caps")}).Flags(ctx, bin)
}

// swapSupported says whether the engine has the fork's --mmproj-gpu-swap, which the plan's swap mode needs; an
// engine that cannot be found or asked counts as not having it.
func swapSupported(ctx context.Context, server string) bool {
	f, err := serverFlags(ctx, server)
	return err == nil && f.MMProjGPUSwap()
}
