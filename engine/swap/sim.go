package swap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Work kinds the simulator accounts for.
const (
	WorkSwap      = "swap"
	WorkEncode    = "encode"
	WorkCompile   = "compile"
	WorkRelaunch  = "relaunch"  // restart and the conversation's evaluation again
	WorkWarm      = "warm"      // the first request's prefix, and the warm-up image's encode
	WorkPrompt    = "prompt"    // a request's new text
	WorkGenerate  = "generate"  // a reply
	WorkEndpoint  = "endpoint"  // a description on the second endpoint
	WorkReprefill = "reprefill" // part of a relaunch: evaluating the conversation again
)

// Split is time on the engine that was hidden (done while nothing waited for it) or exposed (a ready request
// waited for it).
type Split struct {
	Hidden  time.Duration `json:"hidden"`
	Exposed time.Duration `json:"exposed"`
}

// Total is hidden plus exposed.
func (s Split) Total() time.Duration { return s.Hidden + s.Exposed }

// HiddenShare is the hidden fraction, 1 when there was nothing to hide.
func (s Split) HiddenShare() float64 {
	if s.Total() == 0 {
		return 1
	}
	return float64(s.Hidden) / float64(s.Total())
}

func (s *Split) add(o Split) { s.Hidden += o.Hidden; s.Exposed += o.Exposed }

// Event is one action a policy took in a simulation, for --explain.
type Event struct {
	At     time.Duration `json:"at"`
	Step   int           `json:"step"`
	Action Action        `json:"action"`
	Took   time.Duration `json:"took"`
}

// Result is one policy's replay of a trace.
type Result struct {
	Policy string  `json:"policy"`
	Launch Profile `json:"launch"`
	// Served is false when the policy could not serve the trace (a static text-only profile and images).
	Served bool   `json:"served"`
	Why    string `json:"why,omitempty"`
	// Wall is when the last reply ended; EngineWait is the critical path's share spent waiting for the engine
	// (the sum over requests of reply end minus request ready). Waits for people and tools are the same for
	// every policy, so EngineWait is what a policy changes.
	Wall       time.Duration `json:"wall"`
	EngineWait time.Duration `json:"engine_wait"`
	// Work is the engine's time by kind, hidden vs exposed.
	Work map[string]Split `json:"work"`
	// Image is swap + encode (and a second endpoint's descriptions); ImageAhead is the same for the images
	// that were known at least one swap+encode before their request was ready.
	Image        Split           `json:"image"`
	ImageAhead   Split           `json:"image_ahead"`
	ImagesAhead  int             `json:"images_ahead"`
	Images       int             `json:"images"`
	Relaunches   int             `json:"relaunches"`
	ProfileSteps map[Profile]int `json:"profile_steps"` // requests served per profile
	Events       []Event         `json:"events,omitempty"`
}

// simEngine is the simulated engine: a clock, a profile, a cache. It implements Effects.
type simEngine struct {
	c        Costs
	clock    time.Duration // the decision's time: work cannot start before it
	free     time.Duration // when the engine's current work ends
	epFree   time.Duration // when the second endpoint's work ends
	profile  Profile
	compiled bool
	cold     int
	ctx      Context
	images   map[int]*simImage // the current step's images by ID
	segs     []segment
	relaunch int
}

type segment struct {
	kind       string
	start, end time.Duration
	images     []int // for swap and encode: whose
}

type simImage struct {
	id, tokens   int
	known        time.Duration
	announced    time.Duration
	cached       bool
	endpointDone time.Duration // VisionEndpoint: when its description is ready
	profile      Profile       // the profile that encoded it
}

func (e *simEngine) work(kind string, d time.Duration, images ...int) {
	start := max(e.clock, e.free)
	e.segs = append(e.segs, segment{kind: kind, start: start, end: start + d, images: images})
	e.free = start + d
}

func (e *simEngine) Relaunch(_ context.Context, to Profile) error {
	if !slices.Contains(e.c.Profiles, to) {
		return fmt.Errorf("profile %s is not available on this engine (%v)", to, e.c.Profiles)
	}
	if !to.Vision() && e.ctx.Images > 0 {
		return fmt.Errorf("cannot relaunch into %s: the conversation holds %d images", to, e.ctx.Images)
	}
	e.work(WorkRelaunch, e.c.Relaunch.D())
	e.profile = to
	e.relaunch++
	re := e.c.Prefill(e.ctx.TextTokens)
	if e.ctx.Images > 0 {
		re += e.c.Encode(to, e.ctx.ImageTokens) + time.Duration(e.ctx.Images)*e.c.Swap(to)
	}
	e.work(WorkReprefill, re)
	// The evaluation again covers images prefilled for the coming request (they are in the conversation);
	// descriptions from the second endpoint are no use to an engine that now reads pixels.
	for _, im := range e.images {
		if im.cached && im.profile == VisionEndpoint && to.Vision() {
			im.cached = false
		}
	}
	return nil
}

func (e *simEngine) WarmPrompt(_ context.Context, tokens int) error {
	if tokens <= 0 || tokens > e.cold {
		return fmt.Errorf("warm-prompt of %d tokens: %d are known and not evaluated", tokens, e.cold)
	}
	e.work(WorkWarm, e.c.Prefill(tokens))
	e.cold -= tokens
	e.ctx.TextTokens += tokens
	return nil
}

func (e *simEngine) WarmPipeline(_ context.Context, tokens int) error {
	if !e.c.Compiles(e.profile) || e.compiled {
		return fmt.Errorf("warm-pipeline in %s: nothing to compile", e.profile)
	}
	e.work(WorkCompile, e.c.PipelineCompile.D())
	e.work(WorkWarm, e.c.Encode(e.profile, tokens))
	e.compiled = true
	return nil
}

func (e *simEngine) Prefill(_ context.Context, ids []int) error {
	if len(ids) == 0 {
		return errors.New("prefill of no images")
	}
	if !e.profile.TakesImages() {
		return fmt.Errorf("prefill of images in %s", e.profile)
	}
	var run []*simImage
	for _, id := range ids {
		im, ok := e.images[id]
		switch {
		case !ok:
			return fmt.Errorf("prefill of image %d: not part of the coming request", id)
		case im.known > e.clock:
			return fmt.Errorf("prefill of image %d at %s: it is known only at %s", id, e.clock, im.known)
		case im.cached:
			return fmt.Errorf("prefill of image %d: already in the cache", id)
		}
		run = append(run, im)
	}
	if e.cold > 0 {
		// The prefix before the images must be evaluated first.
		e.work(WorkWarm, e.c.Prefill(e.cold))
		e.ctx.TextTokens += e.cold
		e.cold = 0
	}
	e.encodeRun(run)
	return nil
}

// encodeRun encodes images as one run: compile if first, one swap around them, each encode.
func (e *simEngine) encodeRun(run []*simImage) {
	if e.profile == VisionEndpoint {
		for _, im := range run {
			start := max(e.clock, e.epFree, im.known)
			d := e.c.Encode(VisionEndpoint, im.tokens)
			e.segs = append(e.segs, segment{kind: WorkEndpoint, start: start, end: start + d, images: []int{im.id}})
			e.epFree = start + d
			im.endpointDone, im.cached, im.profile = start+d, true, VisionEndpoint
		}
		return
	}
	if e.c.Compiles(e.profile) && !e.compiled {
		e.work(WorkCompile, e.c.PipelineCompile.D())
		e.compiled = true
	}
	ids := make([]int, len(run))
	for i, im := range run {
		ids[i] = im.id
	}
	e.work(WorkSwap, e.c.SwapIn.D()*boolDur(e.profile == MTPSwap), ids...)
	for _, im := range run {
		e.work(WorkEncode, e.c.Encode(e.profile, im.tokens), im.id)
		im.cached, im.profile = true, e.profile
		e.ctx.ImageTokens += im.tokens
		e.ctx.Images++
	}
	e.work(WorkSwap, e.c.SwapOut.D()*boolDur(e.profile == MTPSwap), ids...)
}

func boolDur(b bool) time.Duration {
	if b {
		return 1
	}
	return 0
}

// maxContext and maxSimTime keep every duration the simulator adds up far from overflowing.
const (
	maxContext = 100_000_000
	maxSimTime = 10 * 365 * 24 * time.Hour
)

// maxPlansPerWait bounds the policy's calls in one wait, so a policy that keeps acting cannot hang a replay.
const maxPlansPerWait = 256

// Simulate replays the trace against the cost model under one policy. The policy sees only Observations: an
// image is visible from the moment the trace says it is known, a step's tokens once the step is done.
func Simulate(t Trace, c Costs, name string, pol Policy) (Result, error) {
	if err := t.Validate(); err != nil {
		return Result{}, fmt.Errorf("swap: trace %q: %w", t.Name, err)
	}
	if err := c.Validate(); err != nil {
		return Result{}, fmt.Errorf("swap: cost model: %w", err)
	}
	steps := t.expand()
	e := &simEngine{c: c, cold: t.SystemTokens, images: map[int]*simImage{}}
	res := Result{Policy: name, Served: true, Work: map[string]Split{}, ProfileSteps: map[Profile]int{}}
	var history []StepRecord
	lastRelaunch := -1
	nextID := 0
	end := time.Duration(0)

	observe := func(now time.Duration, ready bool) Observation {
		o := Observation{Now: now, Profile: e.profile, Compiled: e.compiled, ColdPrefix: e.cold, Context: e.ctx,
			Ready: ready, History: history[:len(history):len(history)], LastRelaunch: lastRelaunch}
		for _, im := range sortedImages(e.images) {
			switch {
			case im.cached:
			case im.known <= now:
				o.Pending = append(o.Pending, PendingImage{ID: im.id, Tokens: im.tokens, Known: im.known})
			case im.announced <= now:
				o.Announced++
			}
		}
		return o
	}
	act := func(step int, now time.Duration, acts []Action) error {
		for _, a := range acts {
			e.clock = max(now, e.free)
			before, n := e.free, len(e.segs)
			if err := Carry(context.Background(), e, []Action{a}); err != nil {
				return fmt.Errorf("step %d: policy %s: %w", step, name, err)
			}
			took := e.free - max(before, e.clock)
			if a.Kind == ActPrefill && e.profile == VisionEndpoint && len(e.segs) > n {
				took = e.segs[len(e.segs)-1].end - e.segs[n].start
			}
			res.Events = append(res.Events, Event{At: e.clock, Step: step, Action: a, Took: took})
			if a.Kind == ActRelaunch {
				lastRelaunch = len(history)
			}
		}
		return nil
	}

	for i, st := range steps {
		windowStart := end
		ready := windowStart + st.User.D() + st.Tools.D()
		if st.NewSession && i > 0 {
			e.ctx, e.cold = Context{}, t.SystemTokens
		}
		// This step's images: known and announced times, clamped to the session's start.
		e.images = map[int]*simImage{}
		var times []time.Duration
		for _, ti := range st.Images {
			tokens := ti.Tokens
			if tokens == 0 {
				_, _, tokens = SizeImage(ti.Width, ti.Height, c.ImageTokenBudget)
			}
			ann := max(ti.AnnouncedAhead, ti.KnownAhead)
			im := &simImage{id: nextID, tokens: tokens, known: max(0, ready-ti.KnownAhead.D()),
				announced: max(0, ready-ann.D())}
			nextID++
			e.images[im.id] = im
			times = append(times, max(windowStart, im.known), max(windowStart, im.announced))
		}
		if i == 0 {
			obs := observe(0, false)
			p, why := pol.Launch(obs)
			if !slices.Contains(c.Profiles, p) {
				return Result{}, fmt.Errorf("policy %s launched in %s, which this engine does not offer (%v)", name, p, c.Profiles)
			}
			e.profile, res.Launch = p, p
			res.Events = append(res.Events, Event{Action: Action{Kind: "launch", Profile: p, Reason: why}})
		}
		times = append(times, windowStart)
		slices.Sort(times)
		times = slices.Compact(times)
		// The wait: the policy acts at each moment something becomes known, and again when its work ends.
		calls := 0
		for len(times) > 0 {
			now := times[0]
			times = times[1:]
			if now >= ready {
				break
			}
			if e.free > now {
				if e.free < ready && !slices.Contains(times, e.free) {
					times = append(times, e.free)
					slices.Sort(times)
				}
				continue
			}
			if calls++; calls > maxPlansPerWait {
				return Result{}, fmt.Errorf("step %d: policy %s acted %d times in one wait", i, name, calls)
			}
			acts := pol.Plan(observe(now, false))
			if len(acts) == 0 {
				continue
			}
			if err := act(i, now, acts); err != nil {
				return Result{}, err
			}
			if e.free < ready && !slices.Contains(times, e.free) {
				times = append(times, e.free)
				slices.Sort(times)
			}
		}
		// The request is ready.
		if err := act(i, ready, pol.Plan(observe(ready, true))); err != nil {
			return Result{}, err
		}
		e.clock = max(ready, e.free)
		var left []*simImage
		for _, im := range sortedImages(e.images) {
			if !im.cached {
				left = append(left, im)
			}
		}
		if len(left) > 0 && !e.profile.TakesImages() {
			res.Served = false
			res.Why = fmt.Sprintf("step %d carries %d images and %s cannot take them", i, len(left), e.profile)
			return res, nil
		}
		if e.cold > 0 {
			e.work(WorkWarm, e.c.Prefill(e.cold))
			e.ctx.TextTokens += e.cold
			e.cold = 0
		}
		if len(left) > 0 {
			e.encodeRun(left)
		}
		prompt := st.PromptTokens
		if e.profile == VisionEndpoint {
			for _, im := range e.images {
				e.clock = max(e.clock, im.endpointDone) // the request needs every description
			}
			prompt += len(e.images) * c.captionTokens()
		}
		e.work(WorkPrompt, c.Prefill(prompt))
		acc := -1.0
		if st.Acceptance != nil {
			acc = *st.Acceptance
		}
		e.work(WorkGenerate, c.Generate(e.profile, st.OutputTokens, acc))
		end = e.free
		e.ctx.TextTokens += prompt + st.OutputTokens
		if e.ctx.TextTokens+e.ctx.ImageTokens > maxContext || end > maxSimTime {
			return Result{}, fmt.Errorf("swap: trace %q: step %d: the conversation reaches %d tokens and %s: beyond what "+
				"the simulator models (%d tokens, %s); mark new sessions with new_session", t.Name, i,
				e.ctx.TextTokens+e.ctx.ImageTokens, end, maxContext, maxSimTime)
		}
		res.ProfileSteps[e.profile]++
		res.EngineWait += end - ready

		// Accounting: what ran before the request was ready was hidden.
		rec := StepRecord{PromptTokens: st.PromptTokens, OutputTokens: st.OutputTokens, Wait: ready - windowStart,
			Acceptance: acc}
		perImage := map[int]*Split{}
		for _, im := range e.images {
			perImage[im.id] = &Split{}
		}
		for _, sg := range e.segs {
			hidden := max(0, min(sg.end, ready)-sg.start)
			sp := Split{Hidden: hidden, Exposed: sg.end - sg.start - hidden}
			w := res.Work[sg.kind]
			w.add(sp)
			res.Work[sg.kind] = w
			if sg.kind == WorkSwap || sg.kind == WorkEncode || sg.kind == WorkEndpoint {
				res.Image.add(sp)
				n := time.Duration(len(sg.images))
				for _, id := range sg.images {
					if p, ok := perImage[id]; ok {
						p.add(Split{Hidden: sp.Hidden / n, Exposed: sp.Exposed / n})
					}
				}
			}
		}
		// An image was known "at least one swap+encode ahead" when its lead covers one swap and the encode of
		// every image of its request known no later than it: the work queued before it can be done.
		byKnown := sortedImages(e.images)
		slices.SortStableFunc(byKnown, func(a, b *simImage) int { return cmpDur(a.known, b.known) })
		var queued time.Duration
		for _, im := range byKnown {
			lead := ready - max(im.known, windowStart)
			queued += c.Encode(im.profile, im.tokens)
			if lead >= c.Swap(im.profile)+queued {
				res.ImagesAhead++
				res.ImageAhead.add(*perImage[im.id])
			}
		}
		for _, im := range sortedImages(e.images) {
			rec.Images = append(rec.Images, ImageRecord{Tokens: im.tokens, Lead: ready - max(im.known, windowStart)})
			res.Images++
		}
		e.segs = e.segs[:0]
		history = append(history, rec)
	}
	res.Wall = end
	res.Relaunches = e.relaunch
	return res, nil
}

func sortedImages(m map[int]*simImage) []*simImage {
	out := make([]*simImage, 0, len(m))
	for _, im := range m {
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b *simImage) int { return a.id - b.id })
	return out
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
