package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session/report"
)

// cmdStats is `visor stats [SESSION]` (or `visor stats --costs`: the engines' measured cost models): what each step of a stored session cost (prompt and cached tokens, time to
// first token, tokens/s, draft acceptance) and what the engine did meanwhile (starts, crashes, prefills ahead of
// the question, with their durations). --trace writes the session as a trace that `visor simulate` replays.
func cmdStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	db := fs.String("db", "", "conversation database (default ~/.local/share/visor/visor.db)")
	asTrace := fs.Bool("trace", false, "print the session as a `visor simulate` trace (JSON)")
	asJSON := fs.Bool("json", false, "print the steps as JSON")
	costs := fs.Bool("costs", false, "print each engine's measured cost model and how many samples back each number")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *costs && len(pos) > 0 {
		return fmt.Errorf("stats --costs: the cost models are per engine, not per session: drop %q", pos[0])
	}
	if len(pos) > 1 {
		return fmt.Errorf("stats: one session at a time, got %d: visor stats [SESSION]", len(pos))
	}
	store, err := memory.OpenExisting(ctx, *db)
	if err != nil {
		return err
	}
	defer store.Close()
	if *costs {
		models, err := report.StoredModels(ctx, store)
		if err != nil {
			return err
		}
		return report.WriteCosts(stdout, models, *asJSON)
	}
	format := report.StatsTable
	if *asTrace {
		format = report.StatsTrace
	} else if *asJSON {
		format = report.StatsJSON
	}
	return report.RunStats(ctx, store, pos, format, stdout)
}
