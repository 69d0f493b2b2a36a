package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/memory"
)

// StoredModel is one engine's stored cost model, or why it cannot be read.
type StoredModel struct {
	Row   memory.EngineCosts
	Costs swap.Costs
	Err   error
}

// CostRows lists the stored engine cost rows; *memory.Store implements it.
type CostRows interface {
	ListEngineCosts(ctx context.Context) ([]memory.EngineCosts, error)
}

// StoredModels reads every engine's stored cost model, the most recently updated first.
func StoredModels(ctx context.Context, store CostRows) ([]StoredModel, error) {
	rows, err := store.ListEngineCosts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]StoredModel, len(rows))
	for i, r := range rows {
		out[i].Row = r
		if out[i].Costs, err = swap.ParseCosts(r.Costs); err != nil {
			// The next run of that engine measures it again and replaces the row.
			out[i].Err = fmt.Errorf("stored costs of engine %q: %w", r.Key, err)
		}
	}
	return out, nil
}

// WriteCosts is `visor stats --costs`: each engine's cost model as the scheduler plans with it, and how many
// measurements back each number (0: the default, not measured on this machine).
func WriteCosts(stdout io.Writer, models []StoredModel, asJSON bool) error {
	if asJSON {
		list := []swap.Costs{}
		for _, m := range models {
			if m.Err == nil {
				list = append(list, m.Costs)
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
		if m.Err != nil {
			fmt.Fprintf(stdout, "engine %s: unreadable (%v); its next run measures it again\n", m.Row.Key, m.Err)
			continue
		}
		c := m.Costs
		k := c.Key
		gpu := k.GPU
		if gpu == "" {
			gpu = "CPU"
		}
		fmt.Fprintf(stdout, "engine %s", k.Model)
		if k.Projector != "" {
			fmt.Fprintf(stdout, " + %s", k.Projector)
		}
		fmt.Fprintf(stdout, " on %s, flags %q (updated %s)\n", gpu, k.Flags, m.Row.UpdatedAt.Local().Format(time.DateTime))
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

// PickStored is `visor simulate --costs stored[:TEXT]`: the most recently updated engine's model, or the one
// whose key contains TEXT.
func PickStored(models []StoredModel, arg string) (swap.Costs, error) {
	if len(models) == 0 {
		return swap.Costs{}, fmt.Errorf("--costs %s: no engine costs are stored yet (run a model with `visor ask` first, or use a preset: %s)",
			arg, PresetNames())
	}
	want, filtered := strings.CutPrefix(arg, "stored:")
	var found []StoredModel
	for _, m := range models {
		if !filtered || strings.Contains(m.Row.Key, want) {
			found = append(found, m)
		}
	}
	switch {
	case len(found) == 0:
		return swap.Costs{}, fmt.Errorf("--costs %s: no stored engine's key contains %q: list them with `visor stats --costs`", arg, want)
	case filtered && len(found) > 1:
		return swap.Costs{}, fmt.Errorf("--costs %s: %d stored engines match %q: give more of the key (`visor stats --costs` lists them)",
			arg, len(found), want)
	case found[0].Err != nil:
		return swap.Costs{}, fmt.Errorf("--costs %s: %w", arg, found[0].Err)
	}
	return found[0].Costs, nil
}

// maxSimFile bounds a trace or cost file: real ones are kilobytes.
const maxSimFile = 16 << 20

// PresetNames lists the cost presets.
func PresetNames() string {
	var names []string
	for n := range swap.Presets() {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// LoadCosts is a preset or a cost model file.
func LoadCosts(arg string) (swap.Costs, error) {
	if c, ok := swap.Presets()[arg]; ok {
		return c, nil
	}
	data, err := ReadFile(arg)
	if err != nil {
		return swap.Costs{}, fmt.Errorf("--costs: %w (or name a preset: %s)", err, PresetNames())
	}
	c, err := swap.ParseCosts(data)
	if err != nil {
		return swap.Costs{}, fmt.Errorf("--costs %s: %w", arg, err)
	}
	return c, nil
}

// ReadFile reads a small regular file; anything else (a FIFO, a device, a huge file) is refused rather
// than blocked on or read whole.
func ReadFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; the mode check below then refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSimFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxSimFile {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a trace or cost file", path, maxSimFile>>20)
	}
	return data, nil
}
