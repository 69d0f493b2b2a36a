package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session/report"
)

// cmdSimulate is `visor simulate`: replay agent traces against a cost model and compare the swap scheduler with
// its baselines.
func cmdSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var traces listFlag
	fs.Var(&traces, "trace", "agent trace JSON (repeatable; format: engine/swap/trace.md)")
	costsArg := fs.String("costs", "seed", "cost model: a JSON file, a preset ("+report.PresetNames()+
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
		return &usageError{Msg: "simulate: give --trace FILE (visor stats --trace writes one; examples: engine/swap/testdata/traces/*.json)"}
	}
	var costs swap.Costs
	if *costsArg == "stored" || strings.HasPrefix(*costsArg, "stored:") {
		costs, err = storedCosts(ctx, *db, *costsArg)
	} else {
		costs, err = report.LoadCosts(*costsArg)
	}
	if err != nil {
		return err
	}
	return report.Simulate(traces, costs, *asJSON, *explain, stdout)
}

// storedCosts is --costs stored[:TEXT]: a cost model measured into the database.
func storedCosts(ctx context.Context, db, arg string) (swap.Costs, error) {
	store, err := memory.OpenExisting(ctx, db)
	if err != nil {
		return swap.Costs{}, fmt.Errorf("--costs %s: %w", arg, err)
	}
	defer store.Close()
	models, err := report.StoredModels(ctx, store)
	if err != nil {
		return swap.Costs{}, fmt.Errorf("--costs %s: %w", arg, err)
	}
	return report.PickStored(models, arg)
}
