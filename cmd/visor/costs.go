package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// launchedEngine is what the launcher last started, so the session service can name its cost model.
type launchedEngine struct {
	mu   sync.Mutex
	info session.EngineCosts
	ok   bool
}

// set records a launch (launch.Options.OnStart): its typed placement names and seeds its costs; the plan's mode
// is its profile; a GPU warm-up's image measures the one-time pipeline compile.
func (l *launchedEngine) set(st launch.Started) {
	info := session.EngineCosts{Key: st.CostKey(), EncodesOnCPU: st.EncodesOnCPU(), Defaults: st.DefaultCosts(),
		Profile: st.Profile()}
	if st.ProjectorOnGPU {
		// The warm-up's long prompt also compiles kernels, so it is no measure of prompt speed and is left out.
		info.FirstImage, info.FirstImageTokens = st.Warmup.Image, st.Warmup.ImagePromptTokens
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info, l.ok = info, true
}

// costs is session.Config.EngineCosts: the engine the launcher started last is the one ready.
func (l *launchedEngine) costs(conductor.Ready) (session.EngineCosts, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info, l.ok
}

// projectorTokens is how many prompt tokens an image takes with the projector (its own resize rule), or nil
// when it is unknown (the cost model then estimates).
func projectorTokens(p *vram.Projector) func(w, h int) int {
	if p == nil {
		return nil
	}
	return func(w, h int) int { return p.ImageTokens(w, h) }
}

// storedModel is one engine's stored cost model, or why it cannot be read.
type storedModel struct {
	row   memory.EngineCosts
	costs swap.Costs
	err   error
}

// storedModels reads every engine's stored cost model, the most recently updated first.
func storedModels(ctx context.Context, db string) ([]storedModel, error) {
	store, err := openExistingStore(ctx, db)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	rows, err := store.ListEngineCosts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]storedModel, len(rows))
	for i, r := range rows {
		out[i].row = r
		if out[i].costs, err = swap.ParseCosts(r.Costs); err != nil {
			// The next run of that engine measures it again and replaces the row.
			out[i].err = fmt.Errorf("stored costs of engine %q: %w", r.Key, err)
		}
	}
	return out, nil
}

// printCosts is `visor stats --costs`: each engine's cost model as the scheduler plans with it, and how many
// measurements back each number (0: the default, not measured on this machine).
func printCosts(ctx context.Context, db string, asJSON bool, stdout io.Writer) error {
	models, err := storedModels(ctx, db)
	if err != nil {
		return err
	}
	if asJSON {
		list := []swap.Costs{}
		for _, m := range models {
			if m.err == nil {
				list = append(list, m.costs)
			}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	// Model paths and GPU names are stored text: clean them as every stored text shown on a terminal.
	clean := termtext.NewWriter(stdout)
	defer clean.Flush()
	stdout = clean
	if len(models) == 0 {
		_, err := fmt.Fprintln(stdout, "no measured engine costs yet: they are kept as `visor ask`, `chat` or `web` run a model")
		return err
	}
	for i, m := range models {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if m.err != nil {
			fmt.Fprintf(stdout, "engine %s: unreadable (%v); its next run measures it again\n", m.row.Key, m.err)
			continue
		}
		c := m.costs
		k := c.Key
		gpu := k.GPU
		if gpu == "" {
			gpu = "CPU"
		}
		fmt.Fprintf(stdout, "engine %s", k.Model)
		if k.Projector != "" {
			fmt.Fprintf(stdout, " + %s", k.Projector)
		}
		fmt.Fprintf(stdout, " on %s, flags %q (updated %s)\n", gpu, k.Flags, m.row.UpdatedAt.Local().Format(time.DateTime))
		tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  number\tvalue\tsamples")
		line := func(field, value string) {
			n := c.Samples[field]
			src := fmt.Sprint(n)
			if n == 0 {
				src = "0 (default)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", field, value, src)
		}
		for _, p := range c.Profiles {
			line("tokens_per_second."+string(p), fmt.Sprintf("%.1f tokens/s", c.TokensPerSecond[p]))
		}
		line("draft_acceptance", fmt.Sprintf("%.0f%% of %d drafts", 100*c.DraftAcceptance, c.DraftMax))
		line("prefill_tokens_per_second", fmt.Sprintf("%.1f tokens/s", c.PrefillTokensPerSecond))
		line("encode_cpu_per_token", perToken(c.EncodeCPU))
		line("encode_gpu_per_token", perToken(c.EncodeGPU))
		line("swap_in", c.SwapIn.D().Round(time.Millisecond).String())
		line("swap_out", c.SwapOut.D().Round(time.Millisecond).String())
		line("relaunch", c.Relaunch.D().Round(time.Millisecond).String())
		line("pipeline_compile", c.PipelineCompile.D().Round(time.Millisecond).String())
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func perToken(d swap.Duration) string {
	return fmt.Sprintf("%.3f ms per image token", float64(d)/float64(time.Millisecond))
}

// loadStoredCosts is `visor simulate --costs stored[:TEXT]`: the most recently updated engine's model, or the one
// whose key contains TEXT.
func loadStoredCosts(ctx context.Context, db, arg string) (swap.Costs, error) {
	models, err := storedModels(ctx, db)
	if err != nil {
		return swap.Costs{}, fmt.Errorf("--costs %s: %w", arg, err)
	}
	if len(models) == 0 {
		return swap.Costs{}, fmt.Errorf("--costs %s: no engine costs are stored yet (run a model with `visor ask` first, or use a preset: %s)",
			arg, presetNames())
	}
	want, filtered := strings.CutPrefix(arg, "stored:")
	var found []storedModel
	for _, m := range models {
		if !filtered || strings.Contains(m.row.Key, want) {
			found = append(found, m)
		}
	}
	switch {
	case len(found) == 0:
		return swap.Costs{}, fmt.Errorf("--costs %s: no stored engine's key contains %q: list them with `visor stats --costs`", arg, want)
	case filtered && len(found) > 1:
		return swap.Costs{}, fmt.Errorf("--costs %s: %d stored engines match %q: give more of the key (`visor stats --costs` lists them)",
			arg, len(found), want)
	case found[0].err != nil:
		return swap.Costs{}, fmt.Errorf("--costs %s: %w", arg, found[0].err)
	}
	return found[0].costs, nil
}
