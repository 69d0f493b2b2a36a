package swap

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report compares the scheduler with its baselines on one trace.
type Report struct {
	Trace   string   `json:"trace"`
	Costs   string   `json:"costs"`
	Steps   int      `json:"steps"`
	Images  int      `json:"images"`
	Results []Result `json:"results"` // scheduler, reactive, then each static profile
	// BestStatic is the static profile with the least engine wait, chosen with hindsight.
	BestStatic string `json:"best_static"`
	// VsBestStatic is the scheduler's engine wait over the best static one's, minus one (0.01: 1% slower).
	VsBestStatic float64 `json:"vs_best_static"`
	// VsReactive is the same against the reactive baseline.
	VsReactive float64 `json:"vs_reactive"`
	// History compares what the requests carry of the image history (keep-all, drop-each-turn, the window) in
	// HistoryProfile, the engine's preferred profile that holds images; empty for a trace without images.
	History        []HistoryResult `json:"history,omitempty"`
	HistoryProfile Profile         `json:"history_profile,omitempty"`
}

// Policy names in a Report.
const (
	NameScheduler = "scheduler"
	NameReactive  = "reactive"
)

// StaticName is the name of the static baseline pinned to p.
func StaticName(p Profile) string { return "static " + string(p) }

// Compare replays a trace under the scheduler, the reactive baseline and every static profile the engine
// offers. The scheduler sees only the trace's prior and what each moment makes known; the hindsight-best static
// profile is chosen after all the replays, knowing the whole trace.
func Compare(t Trace, c Costs) (Report, error) {
	rep := Report{Trace: t.Name, Costs: c.Source, Steps: len(t.expand())}
	sched, err := Simulate(t, c, NameScheduler, Scheduler{Costs: c, Expect: t.Expect})
	if err != nil {
		return Report{}, err
	}
	reactive, err := Simulate(t, c, NameReactive, Reactive{Costs: c})
	if err != nil {
		return Report{}, err
	}
	rep.Images = sched.Images
	rep.Results = append(rep.Results, sched, reactive)
	var best *Result
	for _, p := range c.Profiles {
		r, err := Simulate(t, c, StaticName(p), Scheduler{Costs: c, Expect: t.Expect, Pin: p})
		if err != nil {
			return Report{}, err
		}
		rep.Results = append(rep.Results, r)
		if r.Served && (best == nil || r.EngineWait < best.EngineWait) {
			best = &rep.Results[len(rep.Results)-1]
		}
	}
	if best == nil {
		return Report{}, fmt.Errorf("swap: trace %q: no static profile of %v can serve it", t.Name, c.Profiles)
	}
	rep.BestStatic = best.Policy
	rep.VsBestStatic = ratio(sched.EngineWait, best.EngineWait)
	rep.VsReactive = ratio(sched.EngineWait, reactive.EngineWait)
	if rep.Images > 0 {
		for _, p := range c.Profiles {
			if !p.Vision() {
				continue
			}
			if rep.History, err = CompareHistory(t, c, p, 0); err != nil {
				return Report{}, err
			}
			rep.HistoryProfile = p
			break
		}
	}
	return rep, nil
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		if a == 0 {
			return 0
		}
		return 1
	}
	return float64(a)/float64(b) - 1
}

// Result returns the named policy's result.
func (r Report) Result(name string) (Result, bool) {
	for _, x := range r.Results {
		if x.Policy == name {
			return x, true
		}
	}
	return Result{}, false
}

// WriteTable prints the comparison as a table.
func (r Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s: %d requests, %d images; costs: %s\n", r.Trace, r.Steps, r.Images, r.Costs)
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tlaunch\tengine wait\twall\tswap+encode\thidden\texposed\thidden %\tknown-ahead hidden %\tcompile exposed\trelaunches\tvs best static\t")
	best, _ := r.Result(r.BestStatic)
	var unserved []string
	for _, x := range r.Results {
		if !x.Served {
			fmt.Fprintf(tw, "%s\t%s\tcannot serve\t—\t—\t—\t—\t—\t—\t—\t—\t—\t\n", x.Policy, x.Launch)
			unserved = append(unserved, fmt.Sprintf("%s cannot serve: %s", x.Policy, x.Why))
			continue
		}
		ahead := "—"
		if x.ImagesAhead > 0 {
			ahead = fmt.Sprintf("%.1f%% of %d", 100*x.ImageAhead.HiddenShare(), x.ImagesAhead)
		}
		mark := ""
		if x.Policy == r.BestStatic {
			mark = " (best)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%d\t%+.2f%%\t\n", x.Policy, mark, x.Launch,
			secs(x.EngineWait), secs(x.Wall), secs(x.Image.Total()), secs(x.Image.Hidden), secs(x.Image.Exposed),
			100*x.Image.HiddenShare(), ahead, secs(x.Work[WorkCompile].Exposed), x.Relaunches,
			100*ratio(x.EngineWait, best.EngineWait))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range unserved {
		fmt.Fprintf(&b, "  %s\n", u)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(r.History) == 0 {
		return nil
	}
	return WriteHistoryTable(w, r.HistoryProfile, r.History)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// WriteExplain prints why the scheduler did what it did in a result.
func WriteExplain(w io.Writer, x Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on its own decisions:\n", x.Policy)
	for _, ev := range x.Events {
		fmt.Fprintf(&b, "  t=%7.1fs step %3d  %-13s", ev.At.Seconds(), ev.Step, ev.Action.Kind)
		if ev.Action.Profile != "" {
			fmt.Fprintf(&b, " %s", ev.Action.Profile)
		}
		if ev.Took > 0 {
			fmt.Fprintf(&b, " (%s)", ev.Took.Round(time.Millisecond))
		}
		fmt.Fprintf(&b, ": %s\n", ev.Action.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
