package vram

import (
	"context"
	"errors"
	"fmt"

	"github.com/visorhq/visor/engine/gguf"
)

// FileOptions are the inputs of PlanFiles, mirroring `visor plan`'s flags.
type FileOptions struct {
	Model  string // --model
	MMProj string // --mmproj, optional
	// GPU is --gpu: "auto" (every GPU NVML lists), a device index, a size ("24GiB"), or a list of either
	// ("24GiB,24GiB").
	GPU string
	// DeviceNames are llama-server's names for those GPUs, in order (default Vulkan0, Vulkan1, …).
	DeviceNames []string
	// Source reads GPUs for "auto" and indexes; nil means NVML.
	Source GPUSource
	// CPUFallback plans for system RAM (Options.CPU) when --gpu is auto and no GPU is found, instead of failing:
	// `visor plan` wants the CPU plan shown; a launcher that runs llama-server's defaults on the CPU does not.
	CPUFallback bool
	// RAM reads system memory for the fallback; nil means SystemRAM.
	RAM func() (GPU, error)
	Options
}

// PlanFiles reads the GGUF headers (only the headers), resolves the GPU and plans.
func PlanFiles(ctx context.Context, o FileOptions) (Result, error) {
	if o.Model == "" {
		return Result{}, errors.New("no model: pass --model M.gguf (with --mmproj P.gguf for images)") // said to the user as is
	}
	model, err := factsFromPath(o.Model)
	if err != nil {
		return Result{}, err
	}
	if model.Projector != nil {
		return Result{}, fmt.Errorf("--model %s: is a vision projector, not a chat model: pass it as --mmproj, with the chat model as --model", o.Model)
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
	devs, err := ResolveDevices(ctx, src, o.GPU, o.DeviceNames)
	if err != nil && o.CPUFallback && errors.Is(err, ErrNoGPU) && (o.GPU == "" || o.GPU == "auto") {
		ram := o.RAM
		if ram == nil {
			ram = SystemRAM
		}
		g, rerr := ram()
		if rerr != nil {
			return Result{}, fmt.Errorf("%w; and for the CPU plan: %w", err, rerr)
		}
		opts := o.Options
		opts.CPU = true
		res, perr := Plan(model, proj, g, opts)
		if perr != nil {
			return res, perr
		}
		res.Notes = append([]string{fmt.Sprintf("%v: this is the plan for system RAM, where llama-server "+
			"runs on the CPU; pass --gpu SIZE (e.g. --gpu 24GiB) to plan for a card", errors.Unwrap(err))}, res.Notes...)
		return res, nil
	}
	if err != nil {
		return Result{}, err
	}
	return PlanDevices(model, proj, devs, o.Options)
}

func factsFromPath(path string) (Facts, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return Facts{}, fmt.Errorf("vram: %w", err)
	}
	return FactsFromGGUF(f)
}
