package vram

import (
	"context"
	"fmt"

	"github.com/visorhq/visor/engine/gguf"
)

// FileOptions are the inputs of PlanFiles, mirroring `visor plan`'s flags.
type FileOptions struct {
	Model  string // --model
	MMProj string // --mmproj, optional
	// GPU is --gpu: "auto", a device index or a size ("24GiB").
	GPU string
	// Source reads GPUs for "auto" and indexes; nil means NVML.
	Source GPUSource
	Options
}

// PlanFiles reads the GGUF headers (only the headers), resolves the GPU and plans.
func PlanFiles(ctx context.Context, o FileOptions) (Result, error) {
	if o.Model == "" {
		return Result{}, fmt.Errorf("vram: no model given: pass --model M.gguf")
	}
	model, err := factsFromPath(o.Model)
	if err != nil {
		return Result{}, err
	}
	if model.Projector != nil {
		return Result{}, fmt.Errorf("vram: %s is a projector (mmproj), not a language model: pass it as --mmproj", o.Model)
	}
	var proj *Facts
	if o.MMProj != "" {
		p, err := factsFromPath(o.MMProj)
		if err != nil {
			return Result{}, err
		}
		proj = &p
	}
	src := o.Source
	if src == nil {
		src = NVML{}
	}
	gpu, err := ResolveGPU(ctx, src, o.GPU)
	if err != nil {
		return Result{}, err
	}
	return Plan(model, proj, gpu, o.Options)
}

func factsFromPath(path string) (Facts, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return Facts{}, fmt.Errorf("vram: %w", err)
	}
	return FactsFromGGUF(f)
}
