package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/visorhq/visor/engine/llamacpp"
)

// cmdEngine shows which llama-server visor would run and what it supports.
func cmdEngine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "llama-server binary to inspect")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bin, err := llamacpp.Find(*server)
	if err != nil {
		return err
	}
	cache := &llamacpp.HelpCache{Dir: filepath.Join(llamacpp.InstallDir(), "caps")}
	f, err := cache.Flags(ctx, bin)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"binary": bin, "version": f.Version, "spec_types": f.SpecTypes,
			"mmproj_gpu_swap": f.MMProjGPUSwap(), "mmproj_offload": f.Has("--no-mmproj-offload"), "flags": len(f.Names)})
	}
	fmt.Fprintf(stdout, "llama-server:     %s\n%s\nspec types:       %v\nmmproj-gpu-swap:  %v\nmmproj offload:   %v\n",
		bin, f.Version, f.SpecTypes, f.MMProjGPUSwap(), f.Has("--no-mmproj-offload"))
	return nil
}
