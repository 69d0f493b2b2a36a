// Package launch starts llama-server from a VRAM plan (`--plan auto`): the plan's candidate modes, best first,
// each tried until one does not run out of memory. It is the only place that knows both the planner
// (engine/vram, pure arithmetic) and the supervisor (engine/llamacpp, which runs whatever arguments it is
// given), so neither depends on the other.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/vram"
)

// Attempts turns the plan's candidates (vram.Result.Candidates: modes that fit at the requested context, then
// modes that fit at a reduced one) into launch attempts, in the same order. Each attempt's name carries the mode
// and the context it starts with, so a report says what was given up.
func Attempts(r vram.Result) []llamacpp.Attempt {
	var out []llamacpp.Attempt
	for _, p := range r.Candidates() {
		name := fmt.Sprintf("%s (ctx %d)", p.Mode, p.LaunchCtx())
		if !p.Fits {
			name = fmt.Sprintf("%s (ctx %d, reduced from %d)", p.Mode, p.LaunchCtx(), p.Ctx)
		}
		args := append([]string(nil), p.Args...)
		if len(p.Devices) > 0 {
			args = append(args, verbose...)
		}
		out = append(out, llamacpp.Attempt{Name: name, Args: args})
	}
	return out
}

// Start starts llama-server in the best mode of plan r that does not run out of memory: it is
// llamacpp.StartPlanned(ctx, base, Attempts(r), report), with an error that shows the budget when no mode fits
// at all. base carries the binary, alias, threads, ExtraArgs, log file and observers, and no model or launch
// fields (the plan's arguments name them). report (nil, or Reporter's) hears about each mode given up.
func Start(ctx context.Context, base llamacpp.Config, r vram.Result, report func(llamacpp.Attempt, error)) (*llamacpp.Server, llamacpp.Attempt, error) {
	attempts := Attempts(r)
	if len(attempts) == 0 {
		var b strings.Builder
		if err := r.WriteTable(&b); err != nil {
			return nil, llamacpp.Attempt{}, fmt.Errorf("launch: no mode of the plan fits: %w", err)
		}
		return nil, llamacpp.Attempt{}, fmt.Errorf("launch: no mode of the plan for %s fits in %d MiB of %s "+
			"(at %d tokens or more): free GPU memory, lower --ctx, quantise the KV cache or use a smaller model file\n%s",
			r.Model.Path, r.Usable/vram.MiB, r.GPU.Name, vram.MinUsefulCtx, b.String())
	}
	// A GPU plan on a llama-server that sees no GPU would load everything on the CPU and say nothing: ask the
	// binary first (half a second), rather than after loading gigabytes.
	var devs []llamacpp.Device
	if want := WantFor(r, attempts[0].Args); want.GPU != "" {
		if bin, err := llamacpp.Find(base.Binary); err == nil {
			if devs, err = llamacpp.ListDevices(ctx, bin); err != nil {
				devs = nil // not known: the load log alone decides
			} else if err := llamacpp.CheckPlacement(llamacpp.Placement{}, want, devs); err != nil {
				return nil, llamacpp.Attempt{}, fmt.Errorf("launch: %w", err)
			}
		}
	}
	s, a, err := llamacpp.StartPlanned(ctx, base, attempts, report)
	if err != nil {
		return nil, a, fmt.Errorf("launch: %w", err)
	}
	if err := llamacpp.CheckPlacement(s.Placement(), WantFor(r, a.Args), devs); err != nil {
		_ = s.Stop(context.WithoutCancel(ctx))
		return nil, a, fmt.Errorf("launch: mode %s: %w", a.Name, err)
	}
	return s, a, nil
}

// WantFor is where plan r placed a server started with args: on r's GPU unless the plan is for the CPU or the
// args keep every layer off it (-ngl 0), with the vision encoder there too unless the args keep it on the CPU.
// Only a GPU NVML found holds the server to it: a size given by hand (--gpu 24GiB) plans for a card visor
// cannot see, which may not be in this machine at all.
func WantFor(r vram.Result, args []string) llamacpp.Want {
	if r.Options.CPU || !strings.HasPrefix(r.GPU.Source, "nvml") {
		return llamacpp.Want{}
	}
	var w llamacpp.Want
	ngl, mmproj, encoderOnCPU := "", false, false
	for i, a := range args {
		switch a {
		case "-ngl", "--gpu-layers", "--n-gpu-layers":
			if i+1 < len(args) {
				ngl = args[i+1]
			}
		case "--mmproj":
			mmproj = true
		case "--no-mmproj-offload", "--mmproj-gpu-swap":
			encoderOnCPU = true
		}
	}
	if ngl == "0" {
		return w
	}
	w.GPU = r.GPU.Name
	if w.GPU == "" {
		w.GPU = "the GPU"
	}
	w.Projector = mmproj && !encoderOnCPU
	return w
}

// Reporter returns a report callback that tells the user, on w, which mode ran out of memory and why:
//
//	visor: llama-server ran out of memory in mode resident (ctx 213504, reduced from 262144); trying the next mode
//	  ggml_vulkan: Device memory allocation of size 1037832192 failed.
//	  ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory
//	  full log: /path/llama-server.log
//
// Write errors are ignored: a report that cannot be printed must not stop the launch.
func Reporter(w io.Writer) func(llamacpp.Attempt, error) {
	return func(a llamacpp.Attempt, err error) {
		var b strings.Builder
		fmt.Fprintf(&b, "visor: llama-server ran out of memory in mode %s; trying the next mode\n", a.Name)
		for _, l := range llamacpp.OOMLines(err) {
			fmt.Fprintf(&b, "  %s\n", l)
		}
		var ee *llamacpp.ExitError
		if errors.As(err, &ee) && ee.LogFile != "" {
			fmt.Fprintf(&b, "  full log: %s\n", ee.LogFile)
		}
		_, _ = io.WriteString(w, b.String())
	}
}
