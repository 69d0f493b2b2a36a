package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/visorhq/visor/engine/swap"
)

// Simulate replays the agent traces (files) against costs and prints how the swap scheduler compares with its
// baselines: tables, or JSON (with each schedule's events only when explain asks for them).
func Simulate(traces []string, costs swap.Costs, asJSON, explain bool, stdout io.Writer) error {
	var reports []swap.Report
	for _, path := range traces {
		data, err := ReadFile(path)
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
	if asJSON {
		if !explain {
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
		if explain {
			if s, ok := rep.Result(swap.NameScheduler); ok {
				if err := swap.WriteExplain(stdout, s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
