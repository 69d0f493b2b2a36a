package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/vram"
)

// cmdPlan is `visor plan`: what fits in VRAM for a model (and projector), per launch mode, before loading anything.
func cmdPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var o vram.FileOptions
	fs.StringVar(&o.Model, "model", "", "model GGUF")
	fs.StringVar(&o.MMProj, "mmproj", "", "vision projector GGUF")
	fs.StringVar(&o.GPU, "gpu", "auto", "GPUs to plan for: auto (every GPU NVML lists), a device index, a size such as 24GiB, or a list such as 24GiB,24GiB")
	devices := fs.String("devices", "", "llama-server's names for those GPUs, comma-separated (default Vulkan0,Vulkan1,…; see llama-server --list-devices)")
	fs.IntVar(&o.Ctx, "ctx", 0, "context size to check (0: the model's training context)")
	cache := fs.String("cache-type", "", "KV cache type for K and V (f16, q8_0, q4_0, …)")
	fs.StringVar(&o.CacheK, "cache-type-k", "", "K cache type (overrides --cache-type)")
	fs.StringVar(&o.CacheV, "cache-type-v", "", "V cache type (overrides --cache-type)")
	fs.IntVar(&o.UBatch, "ubatch", 0, "physical batch size (-ub)")
	fs.IntVar(&o.Parallel, "parallel", 0, "sequences (-np)")
	fs.IntVar(&o.DraftMax, "draft-max", 0, "MTP draft tokens (--spec-draft-n-max)")
	fs.IntVar(&o.MaxImagePixels, "max-image-pixels", 0, "largest image (width × height) sessions send; larger ones are resized (0: the projector's limit)")
	server := fs.String("server", "", "llama-server binary whose flags decide which modes are available")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	// A negative count is a typo, not "the default": planning for something else without a word would mislead.
	for _, n := range []struct {
		name string
		v    int
	}{{"ctx", o.Ctx}, {"ubatch", o.UBatch}, {"parallel", o.Parallel}, {"draft-max", o.DraftMax}, {"max-image-pixels", o.MaxImagePixels}} {
		if n.v < 0 {
			return &usageError{Msg: fmt.Sprintf("plan: --%s %d: give a positive number, or 0 for the default", n.name, n.v)}
		}
	}
	o.CacheK, o.CacheV = cmp.Or(o.CacheK, *cache), cmp.Or(o.CacheV, *cache)
	var names []string
	if *devices != "" {
		names = strings.Split(*devices, ",")
	}
	return launch.WritePlan(ctx, o, *server, names, *asJSON, stdout)
}
