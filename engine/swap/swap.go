// Package swap decides ahead of time how the engine should serve the images and prompts an agent is about to
// send, so that the MTP↔vision swap, the image encodes and one-time warm-ups run while the engine would otherwise
// wait (a user typing, a tool running) instead of on the critical path.
//
// It provides three pure pieces: a cost model per engine (Costs: measured or default numbers, JSON-serialisable,
// updated from samples by Costs.Update); the scheduler (Scheduler.Launch and Scheduler.Plan: from what is known
// now to a list of Actions, each with its reason), carried out through the small Effects interface; and a
// simulator (Simulate, Compare) that replays an agent Trace against a cost model for the scheduler and its
// baselines. trace.md documents the trace format and what the simulator models.
//
// It does not talk to llama-server, measure anything or store anything. The engine conductor calls Launch once
// before starting the engine, then Plan whenever something changes (a reply ended, an image became known, its
// last action finished, a request is ready) and carries the actions out with Carry and its own Effects; it
// folds what it measures back with Costs.Update. The store keeps a Costs as a JSON blob (encoding/json, read
// back with ParseCosts) under Key.String(), with Key{model, projector, GPU, FlagsKey(launch args)}.
package swap

import "fmt"

// Profile is a launch profile of the engine, named like the VRAM planner's modes (engine/vram.Mode).
type Profile string

// Profiles the scheduler compares. The VRAM plan and the engine's flags say which of them are available.
const (
	Resident    Profile = "resident"      // MTP and projector both on the GPU (only when they fit together)
	MTPSwap     Profile = "mtp-swap"      // projector swapped with the MTP draft context per run of images (fork)
	VisionCPU   Profile = "vision-cpu"    // MTP on the GPU, images encoded on the CPU
	VisionNoMTP Profile = "vision-no-mtp" // projector resident, no speculative decoding
	TextOnly    Profile = "text-only"     // no projector: cannot take images at all
	// VisionEndpoint runs the engine text-only with MTP and sends each image to a second endpoint that answers
	// with a description, which the engine then reads as text. It can start as soon as an image is known (it
	// needs no prompt prefix) and runs beside the engine, but the model reads a description, not pixels: the
	// simulator prices its time only, not its answers' quality.
	VisionEndpoint Profile = "vision-endpoint"
)

// AllProfiles lists every profile in the planner's preference order.
var AllProfiles = []Profile{Resident, MTPSwap, VisionCPU, VisionNoMTP, TextOnly, VisionEndpoint}

// Vision reports whether the engine's own prompt can hold images in profile p.
func (p Profile) Vision() bool {
	switch p {
	case Resident, MTPSwap, VisionCPU, VisionNoMTP:
		return true
	}
	return false
}

// TakesImages reports whether p can serve a request that carries images, by itself or through an endpoint.
func (p Profile) TakesImages() bool { return p.Vision() || p == VisionEndpoint }

// Speculative reports whether p decodes with MTP drafts.
func (p Profile) Speculative() bool { return p != VisionNoMTP }

func (p Profile) valid() bool {
	for _, q := range AllProfiles {
		if p == q {
			return true
		}
	}
	return false
}

// ParseProfile checks a profile name.
func ParseProfile(s string) (Profile, error) {
	if p := Profile(s); p.valid() {
		return p, nil
	}
	return "", fmt.Errorf("swap: unknown profile %q (want one of %v)", s, AllProfiles)
}
