package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// Step is one model request of a session.
type Step struct {
	At              time.Time     `json:"at"`
	After           string        `json:"after"` // "user" or "tools": what the request followed
	Wait            time.Duration `json:"wait_ns"`
	PromptTokens    int           `json:"prompt_tokens"`
	CachedTokens    int           `json:"cached_tokens"`
	Images          int           `json:"images"`
	ImageSizes      [][2]int      `json:"image_sizes,omitempty"`
	PrefillTime     time.Duration `json:"prefill_ns,omitempty"`
	PrefillLead     time.Duration `json:"prefill_lead_ns,omitempty"`
	PrefillWait     time.Duration `json:"prefill_wait_ns,omitempty"` // the request waited this long for a prefill to end
	TTFT            time.Duration `json:"ttft_ns"`
	Generated       int           `json:"generated"`
	TokensPerSecond float64       `json:"tokens_per_second"`
	DraftTokens     int           `json:"draft_tokens,omitempty"`
	DraftAccepted   int           `json:"draft_accepted,omitempty"`
}

// Steps pairs each assistant message with the messages before it (its request's new input) and the prefill
// events that prepared it.
func Steps(msgs []memory.Message, events []memory.EngineEvent) []Step {
	var out []Step
	var prevEnd time.Time
	cur := Step{After: "user"}
	for _, m := range msgs {
		switch m.Role {
		case "user", "tool":
			if m.Role == "tool" {
				cur.After = "tools"
			}
			for _, im := range m.Images {
				cur.Images++
				cur.ImageSizes = append(cur.ImageSizes, [2]int{im.Width, im.Height})
			}
			if cur.At.IsZero() {
				cur.At = m.CreatedAt
			}
		case "assistant":
			t := m.Timings
			if t == nil {
				continue
			}
			cur.PromptTokens, cur.CachedTokens, cur.Generated = t.PromptTokens, t.CachedTokens, t.GeneratedTokens
			cur.TTFT, cur.TokensPerSecond = t.TimeToFirstToken, t.TokensPerSecond
			cur.DraftTokens, cur.DraftAccepted = t.DraftTokens, t.DraftAccepted
			start := m.CreatedAt.Add(-t.Duration)
			if !prevEnd.IsZero() && start.After(prevEnd) {
				cur.Wait = start.Sub(prevEnd)
			}
			for _, e := range events {
				if e.Kind == memory.EnginePrefillWait && e.At.After(prevEnd) && !e.At.After(start) {
					cur.PrefillWait += e.Duration
				}
				if e.Kind == memory.EnginePrefill && e.At.After(prevEnd) && !e.At.After(start) {
					cur.PrefillTime += e.Duration
					if lead := start.Sub(e.At.Add(-e.Duration)); lead > cur.PrefillLead {
						cur.PrefillLead = lead
					}
				}
			}
			out = append(out, cur)
			prevEnd = m.CreatedAt
			cur = Step{After: "user"}
		}
	}
	return out
}

// Trace maps a stored session onto the simulator's trace format (engine/swap/trace.md, "Exporting a real
// session").
func Trace(id string, steps []Step) swap.Trace {
	tr := swap.Trace{Name: "session " + id, Description: "exported by visor stats --trace"}
	for _, s := range steps {
		st := swap.Step{PromptTokens: max(s.PromptTokens, 1), OutputTokens: max(s.Generated, 1)}
		if s.After == "tools" {
			st.Tools = swap.Duration(s.Wait)
		} else {
			st.User = swap.Duration(s.Wait)
		}
		if s.DraftTokens > 0 {
			a := float64(s.DraftAccepted) / float64(s.DraftTokens)
			st.Acceptance = &a
		}
		for _, wh := range s.ImageSizes {
			im := swap.TraceImage{Width: wh[0], Height: wh[1]}
			if im.Width == 0 || im.Height == 0 {
				im = swap.TraceImage{Tokens: 256}
			}
			if s.PrefillLead > 0 {
				im.KnownAhead = swap.Duration(s.PrefillLead)
				im.AnnouncedAhead = im.KnownAhead
			}
			st.Images = append(st.Images, im)
		}
		tr.Steps = append(tr.Steps, st)
	}
	return tr
}

// WriteSteps prints a session's steps as a table, then what the engine did meanwhile.
func WriteSteps(stdout io.Writer, id string, steps []Step, events []memory.EngineEvent) error {
	fmt.Fprintf(stdout, "session %s\n", termtext.Clean(id))
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tprompt\tcached\timages\tprefilled ahead\tfirst token\ttokens\ttokens/s\tdraft accepted")
	for i, s := range steps {
		acc := "—"
		if s.DraftTokens > 0 {
			acc = fmt.Sprintf("%.0f%% of %d", 100*float64(s.DraftAccepted)/float64(s.DraftTokens), s.DraftTokens)
		}
		ahead := "—"
		switch {
		case s.PrefillTime > 0 && s.PrefillWait > 0:
			ahead = fmt.Sprintf("%s (%s hidden, %s exposed)", s.PrefillTime.Round(time.Millisecond),
				max(s.PrefillTime-s.PrefillWait, 0).Round(time.Millisecond), min(s.PrefillWait, s.PrefillTime).Round(time.Millisecond))
		case s.PrefillTime > 0:
			ahead = fmt.Sprintf("%s (hidden)", s.PrefillTime.Round(time.Millisecond))
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%d\t%.1f\t%s\n", i+1, s.PromptTokens, s.CachedTokens, s.Images, ahead,
			s.TTFT.Round(time.Millisecond), s.Generated, s.TokensPerSecond, acc)
	}
	tw.Flush()
	for _, e := range events {
		if e.Kind == memory.EnginePrefill || e.Kind == memory.EnginePrefillWait {
			continue
		}
		// The detail quotes the engine (an error, a path): it must not drive the terminal.
		fmt.Fprintf(stdout, "engine %s at %s (%s) %s\n", termtext.Clean(string(e.Kind)), e.At.Format(time.TimeOnly), e.Duration.Round(time.Millisecond), termtext.Clean(string(e.Detail)))
	}
	return nil
}

// StatsFormat is how RunStats prints: the table, the steps as JSON, or a `visor simulate` trace.
type StatsFormat int

const (
	StatsTable StatsFormat = iota
	StatsJSON
	StatsTrace
)

// RunStats prints `visor stats [SESSION]`: the session args names (an id or a unique prefix; none: the newest
// session with something in it), its steps and what the engine did meanwhile.
func RunStats(ctx context.Context, store *memory.Store, args []string, format StatsFormat, stdout io.Writer) error {
	id := ""
	if len(args) == 1 && strings.TrimSpace(args[0]) == "" {
		return errors.New(`stats "": the session id is empty: give an id or a unique prefix (visor sessions list shows them)`)
	}
	if len(args) == 1 {
		var err error
		if id, err = store.ResolveSessionID(ctx, args[0]); err != nil {
			return fmt.Errorf("stats %s: %w", args[0], err) // the store's error says to list them
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
	steps := Steps(msgs, events)
	switch format {
	case StatsTrace:
		b, err := json.MarshalIndent(Trace(id, steps), "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	case StatsJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(steps)
	}
	return WriteSteps(stdout, id, steps, events)
}
