package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/session"
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
	if *costs {
		if len(pos) > 0 {
			return fmt.Errorf("stats --costs: the cost models are per engine, not per session: drop %q", pos[0])
		}
		store, err := openExistingStore(ctx, *db)
		if err != nil {
			return err
		}
		defer store.Close()
		models, err := report.StoredModels(ctx, store)
		if err != nil {
			return err
		}
		return report.WriteCosts(stdout, models, *asJSON)
	}
	if len(pos) > 1 {
		return fmt.Errorf("stats: one session at a time, got %d: visor stats [SESSION]", len(pos))
	}
	store, err := openExistingStore(ctx, *db)
	if err != nil {
		return err
	}
	defer store.Close()
	id := ""
	if len(pos) == 1 && strings.TrimSpace(pos[0]) == "" {
		return errors.New(`stats "": the session id is empty: give an id or a unique prefix (visor sessions list shows them)`)
	}
	if len(pos) == 1 {
		if id, err = store.ResolveSessionID(ctx, pos[0]); err != nil {
			return fmt.Errorf("stats %s: %w: list sessions with `visor sessions list`", pos[0], err)
		}
	} else {
		// The newest session with something in it: an empty row (left by an older visor) has no stats.
		list, err := session.List(ctx, store, session.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return errors.New("stats: no stored sessions yet: run `visor ask` or `visor chat` first")
		}
		id = list[0].ID
	}
	msgs, err := store.Messages(ctx, id)
	if err != nil {
		return err
	}
	events, err := store.EngineEvents(ctx, id, 10000)
	if err != nil {
		return err
	}
	steps := report.Steps(msgs, events)
	switch {
	case *asTrace:
		b, err := json.MarshalIndent(report.Trace(id, steps), "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(steps)
	}
	return report.WriteSteps(stdout, id, steps, events)
}
