package vram

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Buffer is one allocation llama-server's load log reports (at -lv 4): "load_tensors: Vulkan1 model buffer size
// = 812.00 MiB", "llama_kv_cache: Vulkan0 KV buffer size = …", "llama_memory_recurrent: … RS buffer size",
// "sched_reserve: … compute buffer size".
type Buffer struct {
	Kind string `json:"kind"` // model, KV, RS or compute
	// Buffer is the buffer type as printed: Vulkan1, CUDA0, CPU_Mapped, RPC0[127.0.0.1:50053].
	Buffer string `json:"buffer"`
	// Context counts llama contexts from 0 (the main one); 1 is the MTP draft context. Model buffers have 0.
	Context int     `json:"context"`
	MiB     float64 `json:"mib"`
}

// LoadLog is what the load log says about placement.
type LoadLog struct {
	Buffers []Buffer `json:"buffers"`
	// CLIP is the backend the vision encoder runs on ("CLIP using Vulkan1 backend"); empty without a projector.
	CLIP string `json:"clip,omitempty"`
	// Copies is each context's "sched copies" (pipeline parallelism keeps that many copies of graph inputs).
	Copies []int `json:"copies,omitempty"`
}

var (
	reLogBuffer = regexp.MustCompile(`(load_tensors|llama_kv_cache|llama_memory_recurrent|sched_reserve):\s+(\S+)\s+(model|KV|RS|compute) buffer size =\s*([\d.]+) MiB`)
	reLogCtx    = regexp.MustCompile(`llama_context: n_ctx\s+=`)
	reLogCLIP   = regexp.MustCompile(`CLIP using (\S+) backend`)
	reLogCopies = regexp.MustCompile(`sched copies = (\d+)`)
)

// ParseLoadLog reads the placement lines of a llama-server log. A context's compute buffers are taken from its
// first reservation only (the server reserves the draft context again once speculation starts).
func ParseLoadLog(lines []string) LoadLog {
	var l LoadLog
	ctx := -1
	reserved := map[[2]string]bool{}
	for _, line := range lines {
		if reLogCtx.MatchString(line) {
			ctx++
			continue
		}
		if m := reLogCLIP.FindStringSubmatch(line); m != nil {
			l.CLIP = m[1]
			continue
		}
		if m := reLogCopies.FindStringSubmatch(line); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && len(l.Copies) <= ctx {
				l.Copies = append(l.Copies, n)
			}
			continue
		}
		m := reLogBuffer.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			continue
		}
		b := Buffer{Kind: m[3], Buffer: m[2], Context: max(ctx, 0), MiB: v}
		if b.Kind == "model" {
			b.Context = 0
		}
		if b.Kind == "compute" {
			key := [2]string{strconv.Itoa(b.Context), b.Buffer}
			if reserved[key] {
				continue
			}
			reserved[key] = true
		}
		l.Buffers = append(l.Buffers, b)
	}
	return l
}

// hostBuffer says a buffer lives in host memory (CPU, CPU_Mapped, Vulkan_Host, CUDA_Host), not on a device.
func hostBuffer(name string) bool {
	return strings.HasPrefix(name, "CPU") || strings.HasSuffix(name, "_Host")
}

// owns says whether buffer name b belongs to device d: the same name (Vulkan1), or for RPC devices, whose
// buffers are named after the server's local device and endpoint ("RPC0[127.0.0.1:50053]" for RPC1), the
// device's description in brackets.
func (d Device) owns(b string) bool {
	return b == d.Name || d.Description != "" && strings.HasSuffix(b, "["+d.Description+"]")
}

// Check is one planned buffer against the load log.
type Check struct {
	Device    string  `json:"device"`
	Component string  `json:"component"`
	Planned   float64 `json:"planned_mib"`
	Logged    float64 `json:"logged_mib"`
	OK        bool    `json:"ok"`
	Note      string  `json:"note,omitempty"`
}

func (c Check) String() string {
	verdict := "ok"
	if !c.OK {
		verdict = "MISMATCH"
	}
	s := fmt.Sprintf("%-8s %-9s %-16s planned %8.1f MiB, logged %8.1f MiB", verdict, c.Device, c.Component, c.Planned, c.Logged)
	if c.Component == "projector" {
		// The log names the encoder's device, not its size.
		s = fmt.Sprintf("%-8s %-9s %-16s planned %8.1f MiB here", verdict, c.Device, c.Component, c.Planned)
	}
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

// logged maps a planned component to the buffer kind and context the log reports it as.
var logged = map[string]struct {
	kind string
	ctx  int
	tol  float64
}{
	"weights":         {"model", 0, 0.02},
	"KV cache":        {"KV", 0, 0.02},
	"recurrent state": {"RS", 0, 0.02},
	"compute":         {"compute", 0, 0.10},
	"MTP KV":          {"KV", 1, 0.02},
	"MTP compute":     {"compute", 1, 0.10},
}

// checkFloor is the absolute slack under which a size difference is noise (small compute buffers, alignment).
const checkFloor = 16.0

// CheckPlacement compares a multi-device placement p (one of PlanDevices' modes) with the buffers llama-server
// logged while loading it (the log must be at -lv 4). Every planned buffer must appear on its device within a
// tolerance (2% for weights, KV and recurrent state, which are exact; 10% for compute buffers, which are
// fitted), no device buffer may appear where the plan put none, the vision encoder must run on the projector's
// device, and pipeline parallelism must be off. The error lists every mismatch; the checks are returned
// either way, for display.
func CheckPlacement(p ModePlan, devs []Device, l LoadLog) ([]Check, error) {
	if len(p.Devices) == 0 {
		return nil, fmt.Errorf("vram: mode %s is a single-device plan: nothing to check per device", p.Mode)
	}
	byName := map[string]Device{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	var checks []Check
	var problems []string
	fail := func(c Check) {
		checks = append(checks, c)
		problems = append(problems, c.String())
	}
	used := make([]bool, len(l.Buffers))
	planned := map[string]bool{} // device + kind + context that the plan expects
	for _, dp := range p.Devices {
		dev, ok := byName[dp.Device]
		if !ok {
			return nil, fmt.Errorf("vram: plan names device %s, which is not among the devices given", dp.Device)
		}
		for _, c := range dp.Components {
			want := float64(c.Bytes) / MiB
			if c.Name == "projector" {
				ch := Check{Device: dp.Device, Component: c.Name, Planned: want, OK: l.CLIP != "" && dev.owns(l.CLIP),
					Note: "vision encoder on " + orNone(l.CLIP)}
				if ch.OK {
					checks = append(checks, ch)
				} else {
					fail(ch)
				}
				continue
			}
			lg, ok := logged[c.Name]
			if !ok {
				continue // encoder compute and the driver context are not in the load log
			}
			planned[dp.Device+"/"+lg.kind+"/"+strconv.Itoa(lg.ctx)] = true
			var got float64
			found := false
			for i, b := range l.Buffers {
				if b.Kind == lg.kind && b.Context == lg.ctx && dev.owns(b.Buffer) {
					got += b.MiB
					used[i], found = true, true
				}
			}
			ch := Check{Device: dp.Device, Component: c.Name, Planned: want, Logged: got}
			switch {
			case !found:
				ch.Note = "no such buffer on this device"
			case math.Abs(got-want) <= max(lg.tol*want, checkFloor):
				ch.OK = true
			default:
				ch.Note = fmt.Sprintf("%+.1f%%, tolerance %.0f%%", 100*(got/want-1), 100*lg.tol)
			}
			if ch.OK {
				checks = append(checks, ch)
			} else {
				fail(ch)
			}
		}
	}
	for i, b := range l.Buffers {
		if used[i] || hostBuffer(b.Buffer) {
			continue
		}
		owner := "an unplanned device"
		for _, d := range devs {
			if d.owns(b.Buffer) {
				owner = d.Name
			}
		}
		if planned[owner+"/"+b.Kind+"/"+strconv.Itoa(b.Context)] {
			continue
		}
		fail(Check{Device: owner, Component: b.Kind + " buffer", Logged: b.MiB,
			Note: fmt.Sprintf("%s (context %d) where the plan put none", b.Buffer, b.Context)})
	}
	for i, n := range l.Copies {
		if n > 1 {
			fail(Check{Component: "pipeline", Note: fmt.Sprintf("context %d runs %d pipeline copies: its compute "+
				"buffers hold %d copies of the inputs, more than planned", i, n, n)})
		}
	}
	if len(l.Buffers) == 0 {
		problems = append(problems, "the log names no buffers: start llama-server with -lv 4 to check placement")
	}
	if len(problems) > 0 {
		return checks, errors.New("vram: placement " + string(p.Mode) + " differs from the plan:\n  " + strings.Join(problems, "\n  "))
	}
	return checks, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// LogLines keeps the placement lines of a server log as they stream by (an llamacpp.Config.OnLog observer), so
// that CheckPlacement can read them after the start. It is safe for concurrent use and keeps only lines that
// ParseLoadLog reads, so a long-running server's log does not pile up.
type LogLines struct {
	mu    sync.Mutex
	lines []string
}

// Add is the OnLog observer.
func (c *LogLines) Add(line string) {
	if !reLogBuffer.MatchString(line) && !reLogCtx.MatchString(line) && !reLogCLIP.MatchString(line) &&
		!reLogCopies.MatchString(line) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lines) < maxLogLines {
		c.lines = append(c.lines, line)
	}
}

// maxLogLines bounds LogLines: a load logs a few dozen placement lines; a server restarted in a loop must not
// grow it without end.
const maxLogLines = 4096

// Lines returns a copy of the lines kept so far.
func (c *LogLines) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}
