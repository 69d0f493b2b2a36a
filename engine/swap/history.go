package swap

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// History policies compared by SimulateHistory.
const (
	HistoryKeepAll  = "keep-all"       // every image in every request
	HistoryDropEach = "drop-each-turn" // the last Keep images; the oldest leaves with every new one
	HistoryWindow   = "window"         // the last Keep images; older ones leave Batch at a time (ChooseWindow)
	// HistoryWindowAhead is the window with its cuts planned ahead (PlanCut): a cut the next images are expected to
	// make is evaluated while the user types or the tools run, before they come.
	HistoryWindowAhead = "window, cut planned ahead"
)

// HistoryPolicy is what SimulateHistory replays: a window (Keep 0: keep-all), and whether its cuts are planned
// ahead.
type HistoryPolicy struct {
	Name   string
	Window Window
	// PlanCut asks PlanCut at the start of each step's wait, as the session does at a turn's end and the loop
	// while tools run, from what earlier steps showed; when it says ahead, the conversation so far is evaluated
	// as the next request is expected to render it.
	PlanCut bool
}

// stubTokens is what an image's stub (agent.ImageStub) takes in the prompt.
const stubTokens = 6

// HistoryResult is one image-history policy's replay of a trace in one profile, with lookahead.
type HistoryResult struct {
	Policy string `json:"policy"`
	Window Window `json:"window"`
	// EngineWait is the sum over requests of reply end minus request ready: what the user waits for.
	EngineWait time.Duration `json:"engine_wait"`
	// HistoryImages is the server's work on images already sent (decoded and hashed again each request), and
	// Reeval the evaluations again after a cut, each hidden (before its request was ready) or exposed.
	HistoryImages Split `json:"history_images"`
	Reeval        Split `json:"reeval"`
	Cuts          int   `json:"cuts"`
	// PlannedAhead is how many cuts PlanCut had evaluated ahead, and Missed how many of those the step's images
	// did not make (the request evaluated its prompt again).
	PlannedAhead int `json:"planned_ahead,omitempty"`
	Missed       int `json:"missed,omitempty"`
	// MaxCarried is the most images one request carried; LastWait the last request's engine wait.
	MaxCarried int           `json:"max_carried"`
	LastWait   time.Duration `json:"last_wait"`
}

// histItem is a piece of the conversation's prompt: text, or one image.
type histItem struct {
	tokens int
	image  int // 1 + the image's index in the conversation; 0 for text
}

// histEngine is a one-slot engine whose cache holds a prefix of the conversation as rendered with some cut.
type histEngine struct {
	c      Costs
	p      Profile
	w      Window
	items  []histItem
	images int // images in items
	cached int // items in the cache
	cacheD int // the cut the cache was rendered with
	free   time.Duration
	res    *HistoryResult
	seg    []histSeg
}

type histSeg struct {
	kind       int // 0 history images, 1 reeval, 2 other
	start, end time.Duration
}

// render evaluates the conversation's first n items under cut d at time at (no earlier than the engine is
// free): the server decodes every carried image, and evaluates from the cached prefix on. It returns when the
// work ends.
func (e *histEngine) render(at time.Duration, n, d int, reeval bool) time.Duration {
	start := max(at, e.free)
	if d != e.cacheD {
		// The first image left out under one cut and not the other is where the prompt changed: the cache holds
		// what is before it. (A cut planned ahead that the images did not make is undone: d is then smaller.)
		lo, hi := min(d, e.cacheD), max(d, e.cacheD)
		for i := 0; i < e.cached; i++ {
			if im := e.items[i].image; im > 0 && im-1 >= lo && im-1 < hi {
				e.cached = i
				break
			}
		}
		e.cacheD = d
		if reeval {
			e.res.Cuts++
		}
	}
	carried := 0
	for _, it := range e.items[:n] {
		if it.image > d {
			carried++
		}
	}
	hist := time.Duration(carried) * e.c.CachedImage.D()
	var eval time.Duration
	for _, it := range e.items[min(e.cached, n):n] {
		switch {
		case it.image == 0:
			eval += e.c.Prefill(it.tokens)
		case it.image <= d:
			eval += e.c.Prefill(stubTokens)
		default:
			eval += e.c.Encode(e.p, it.tokens)
		}
	}
	e.seg = append(e.seg, histSeg{kind: 0, start: start, end: start + hist})
	kind := 2
	if reeval {
		kind = 1
	}
	e.seg = append(e.seg, histSeg{kind: kind, start: start + hist, end: start + hist + eval})
	e.cached = max(e.cached, n)
	e.free = start + hist + eval
	e.res.MaxCarried = max(e.res.MaxCarried, carried)
	return e.free
}

// SimulateHistory replays a trace's images in profile p under an image-history policy. Lookahead is visor's, the
// same for every policy: each image is evaluated (prefilled) when it is known, and that prefill renders the
// prompt the request will send, so a cut that moves with the image is evaluated then too, hidden in the time the
// user goes on typing; what is left is evaluated by the request. With pol.PlanCut a cut is also evaluated at the
// start of the wait when PlanCut says so (a screenshot sent at once has no lead to hide it in). Generation is the
// same for every policy.
func SimulateHistory(t Trace, c Costs, p Profile, pol HistoryPolicy) (HistoryResult, error) {
	if err := t.Validate(); err != nil {
		return HistoryResult{}, fmt.Errorf("swap: trace %q: %w", t.Name, err)
	}
	if err := c.Validate(); err != nil {
		return HistoryResult{}, fmt.Errorf("swap: cost model: %w", err)
	}
	if !p.Vision() {
		return HistoryResult{}, fmt.Errorf("swap: profile %s holds no images in the prompt", p)
	}
	w := pol.Window
	res := HistoryResult{Policy: pol.Name, Window: w}
	e := &histEngine{c: c, p: p, w: w, res: &res, items: []histItem{{tokens: t.SystemTokens}}}
	end := time.Duration(0)
	var seen []histStep // the session's earlier steps, for PlanCut
	for _, st := range t.expand() {
		if st.NewSession {
			e.items, e.images, e.cached, e.cacheD = []histItem{{tokens: t.SystemTokens}}, 0, 0, 0
			seen = nil
		}
		start := end
		ready := start + st.User.D() + st.Tools.D()
		// The images the step's prefills render the prompt for: those known so far, or the planned cut's.
		expect := 0
		if pol.PlanCut && w.Keep > 0 {
			if plan := PlanCut(c, cutNeeds(w, p, e.images, seen)); plan.Ahead {
				expect = plan.Expected
				res.PlannedAhead++
				if len(st.Images) < expect {
					res.Missed++
				}
				d := w.Dropped(e.images + expect)
				e.render(start, len(e.items), d, d != e.cacheD)
			}
		}
		before := e.images
		var leads []time.Duration
		for _, im := range st.Images {
			tokens := im.Tokens
			if tokens == 0 {
				_, _, tokens = SizeImage(im.Width, im.Height, c.ImageTokenBudget)
			}
			e.images++
			e.items = append(e.items, histItem{tokens: tokens, image: e.images})
			known := max(start, ready-im.KnownAhead.D())
			leads = append(leads, ready-known)
			if known < ready {
				// Prefill up to this image, rendered as a request with the images known so far (or still
				// expected, under a planned cut) would be.
				d := w.Dropped(max(e.images, before+expect))
				e.render(known, len(e.items), d, d != e.cacheD)
			}
		}
		seen = append(seen, histStep{images: len(st.Images), leads: leads})
		e.items = append(e.items, histItem{tokens: st.PromptTokens})
		d := w.Dropped(e.images)
		first := e.render(ready, len(e.items), d, d != e.cacheD)
		acc := -1.0
		if st.Acceptance != nil {
			acc = *st.Acceptance
		}
		end = first + c.Generate(p, st.OutputTokens, acc)
		e.free = end
		e.items = append(e.items, histItem{tokens: st.OutputTokens})
		e.cached = len(e.items)
		wait := end - ready
		res.EngineWait += wait
		res.LastWait = wait
		for _, sg := range e.seg {
			hidden := max(0, min(sg.end, ready)-sg.start)
			sp := Split{Hidden: hidden, Exposed: sg.end - sg.start - hidden}
			switch sg.kind {
			case 0:
				res.HistoryImages.add(sp)
			case 1:
				res.Reeval.add(sp)
			}
		}
		e.seg = e.seg[:0]
		if end > maxSimTime {
			return HistoryResult{}, fmt.Errorf("swap: trace %q runs past %s: beyond what the simulator models", t.Name, maxSimTime)
		}
	}
	return res, nil
}

// histStep is what a step showed of its images, for the next steps' PlanCut.
type histStep struct {
	images int
	leads  []time.Duration
}

// cutNeeds is what the session asks PlanCut at a turn's end (session's cutPlanLocked): the next step is expected
// to add as many images as the last of the four latest steps that had any, as likely as the share of those four
// that had any, with the median lead of the latest steps' images.
func cutNeeds(w Window, p Profile, images int, seen []histStep) CutNeeds {
	n := CutNeeds{Window: w, Images: images, Profile: p}
	users, with := 0, 0
	for i := len(seen) - 1; i >= 0 && users < 4; i-- {
		users++
		if seen[i].images > 0 {
			with++
			if n.Expected == 0 {
				n.Expected = seen[i].images
			}
		}
	}
	if n.Expected == 0 {
		return n
	}
	n.Sure = float64(with) / float64(users)
	var leads []time.Duration
	for i := len(seen) - 1; i >= 0 && len(leads) < 4; i-- {
		leads = append(leads, seen[i].leads...)
	}
	if len(leads) > 0 {
		slices.Sort(leads)
		n.Lead = leads[len(leads)/2]
	}
	return n
}

// CompareHistory replays a trace under keep-all, drop-each-turn, the window ChooseWindow picks for the trace's
// own image leads (what a session would have measured), and that window with its cuts planned ahead, in
// profile p.
func CompareHistory(t Trace, c Costs, p Profile, contextTokens int) ([]HistoryResult, error) {
	var leads []time.Duration
	tokens, n := 0, 0
	text, steps := 0, 0
	for _, st := range t.expand() {
		text += st.PromptTokens + st.OutputTokens
		steps++
		for _, im := range st.Images {
			leads = append(leads, im.KnownAhead.D())
			k := im.Tokens
			if k == 0 {
				_, _, k = SizeImage(im.Width, im.Height, c.ImageTokenBudget)
			}
			tokens, n = tokens+k, n+1
		}
	}
	needs := WindowNeeds{Profile: p, ContextTokens: contextTokens, Leads: leads}
	if n > 0 {
		needs.ImageTokens = tokens / n
		needs.StepTokens = text / max(1, n) // the text between two images
	}
	w := ChooseWindow(c, needs)
	var out []HistoryResult
	for _, pol := range []HistoryPolicy{{Name: HistoryKeepAll}, {Name: HistoryDropEach, Window: Window{Keep: w.Keep, Batch: 1}},
		{Name: HistoryWindow, Window: w}, {Name: HistoryWindowAhead, Window: w, PlanCut: true}} {
		r, err := SimulateHistory(t, c, p, pol)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// WriteHistoryTable prints CompareHistory's results.
func WriteHistoryTable(w io.Writer, profile Profile, rs []HistoryResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "image history in %s (with lookahead):\n", profile)
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "history\twindow\tengine wait\tlast request\thistory images exposed\tre-eval hidden\tre-eval exposed\tcuts\tplanned ahead (missed)\tmost images sent\t")
	for _, r := range rs {
		win := "—"
		if r.Window.Keep > 0 {
			win = fmt.Sprintf("keep %d, batch %d", r.Window.Keep, max(r.Window.Batch, 1))
		}
		ahead := "—"
		if r.PlannedAhead > 0 {
			ahead = fmt.Sprintf("%d (%d)", r.PlannedAhead, r.Missed)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t\n", r.Policy, win, secs(r.EngineWait), secs(r.LastWait),
			secs(r.HistoryImages.Exposed), secs(r.Reeval.Hidden), secs(r.Reeval.Exposed), r.Cuts, ahead, r.MaxCarried)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Policy == HistoryWindow && r.Window.Reason != "" {
			fmt.Fprintf(&b, "  window: %s\n", r.Window.Reason)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
