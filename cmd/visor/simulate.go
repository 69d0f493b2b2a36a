package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/visorhq/visor/engine/swap"
)

// maxSimFile bounds a trace or cost file: real ones are kilobytes.
const maxSimFile = 16 << 20

// cmdSimulate is `visor simulate`: replay agent traces against a cost model and compare the swap scheduler with
// its baselines.
func cmdSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var traces listFlag
	fs.Var(&traces, "trace", "agent trace JSON (repeatable; format: engine/swap/trace.md)")
	costsArg := fs.String("costs", "seed", "cost model: a JSON file, a preset ("+presetNames()+
		"), or stored[:TEXT]: the engine costs measured into --db (the latest, or the engine whose key has TEXT)")
	db := fs.String("db", "", "conversation database for --costs stored (default ~/.local/share/visor/visor.db)")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	explain := fs.Bool("explain", false, "also print each scheduler action and why it was taken")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	traces = append(traces, rest...)
	if len(traces) == 0 {
		fs.Usage()
		return errors.New("simulate: give --trace FILE (examples: engine/swap/testdata/traces/*.json)")
	}
	var costs swap.Costs
	if *costsArg == "stored" || strings.HasPrefix(*costsArg, "stored:") {
		costs, err = loadStoredCosts(ctx, *db, *costsArg)
	} else {
		costs, err = loadCosts(*costsArg)
	}
	if err != nil {
		return err
	}
	var reports []swap.Report
	for _, path := range traces {
		data, err := readSimFile(path)
		if err != nil {
			return err
		}
		t, err := swap.ParseTrace(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rep, err := swap.Compare(t, costs)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		reports = append(reports, rep)
	}
	if *asJSON {
		if !*explain {
			for i := range reports {
				for j := range reports[i].Results {
					reports[i].Results[j].Events = nil
				}
			}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	for i, rep := range reports {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := rep.WriteTable(stdout); err != nil {
			return err
		}
		if *explain {
			if s, ok := rep.Result(swap.NameScheduler); ok {
				if err := swap.WriteExplain(stdout, s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func presetNames() string {
	var names []string
	for n := range swap.Presets() {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func loadCosts(arg string) (swap.Costs, error) {
	if c, ok := swap.Presets()[arg]; ok {
		return c, nil
	}
	data, err := readSimFile(arg)
	if err != nil {
		return swap.Costs{}, fmt.Errorf("--costs: %w (or name a preset: %s)", err, presetNames())
	}
	c, err := swap.ParseCosts(data)
	if err != nil {
		return swap.Costs{}, fmt.Errorf("--costs %s: %w", arg, err)
	}
	return c, nil
}

// readSimFile reads a small regular file; anything else (a FIFO, a device, a huge file) is refused rather
// than blocked on or read whole.
func readSimFile(path string) ([]byte, error) {
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
