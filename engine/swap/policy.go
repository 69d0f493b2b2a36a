package swap

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Observation is everything the scheduler may know at one moment: the engine's state, the images known for the
// next request, and the steps already done. It holds nothing about the future beyond what the session knows.
type Observation struct {
	Now     time.Duration // since the session started
	Profile Profile       // the engine's current profile
	// Compiled is true once the GPU pipelines for images exist (they survive a relaunch).
	Compiled bool
	// ColdPrefix is the number of prompt tokens known for the next request's prefix but not yet evaluated
	// (the system prompt and tools before the first request).
	ColdPrefix int
	// Context is what the engine's cache holds: the conversation so far.
	Context Context
	// Pending are the next request's images that are known and not yet in the cache, in prompt order.
	Pending []PendingImage
	// Announced is how many more images the next request will carry that are not known yet (a screenshot
	// tool is still running).
	Announced int
	// Ready is true when the next request is ready and waiting: only what it cannot be served without
	// (a relaunch into a profile that takes images) still makes sense.
	Ready bool
	// Queued is the request's place in the engine's queue (1: next), 0 when it is not waiting: other requests
	// run on the engine, and its prefill waits for a free server slot.
	Queued int
	// History are the steps done so far, as observed.
	History []StepRecord
	// LastRelaunch is len(History) at the last relaunch, or -1.
	LastRelaunch int
}

// Context is the conversation held in the engine's cache.
type Context struct {
	TextTokens  int `json:"text_tokens"`
	ImageTokens int `json:"image_tokens"`
	Images      int `json:"images"`
}

// PendingImage is a known image the next request carries.
type PendingImage struct {
	ID     int           `json:"id"`
	Tokens int           `json:"tokens"`
	Known  time.Duration `json:"known"`
}

// StepRecord is a finished step as the session saw it.
type StepRecord struct {
	PromptTokens int           `json:"prompt_tokens"`
	OutputTokens int           `json:"output_tokens"`
	Wait         time.Duration `json:"wait"` // from the previous reply to this request
	Images       []ImageRecord `json:"images,omitempty"`
	Acceptance   float64       `json:"acceptance"` // measured draft acceptance; < 0 when not measured
}

// ImageRecord is one image of a finished step and how long before its request it became usable.
type ImageRecord struct {
	Tokens int           `json:"tokens"`
	Lead   time.Duration `json:"lead"`
}

// ActionKind names what an action does.
type ActionKind string

// Actions the scheduler emits.
const (
	ActRelaunch     ActionKind = "relaunch"      // restart in another profile and evaluate the conversation again
	ActWarmPrompt   ActionKind = "warm-prompt"   // evaluate the known prefix of the first request
	ActWarmPipeline ActionKind = "warm-pipeline" // encode a throwaway image of the intake size: compiles pipelines
	ActPrefill      ActionKind = "prefill"       // evaluate the next request's prefix up to and with these images
)

// Action is one thing for the conductor to do now, in order, with the reason shown by --explain and the log.
type Action struct {
	Kind    ActionKind `json:"kind"`
	Profile Profile    `json:"profile,omitempty"` // ActRelaunch: the new profile
	Images  []int      `json:"images,omitempty"`  // ActPrefill: PendingImage IDs, one encode run (one swap)
	Tokens  int        `json:"tokens,omitempty"`  // ActWarmPrompt: prefix tokens; ActWarmPipeline: image tokens
	Reason  string     `json:"reason"`
}

// Effects carries actions out. The engine conductor implements it against llama-server; the simulator against
// a clock; tests with a recorder.
type Effects interface {
	Relaunch(ctx context.Context, to Profile) error
	WarmPrompt(ctx context.Context, tokens int) error
	WarmPipeline(ctx context.Context, imageTokens int) error
	Prefill(ctx context.Context, images []int) error
}

// Carry performs actions in order, stopping at the first failure.
func Carry(ctx context.Context, e Effects, actions []Action) error {
	for i, a := range actions {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		switch a.Kind {
		case ActRelaunch:
			err = e.Relaunch(ctx, a.Profile)
		case ActWarmPrompt:
			err = e.WarmPrompt(ctx, a.Tokens)
		case ActWarmPipeline:
			err = e.WarmPipeline(ctx, a.Tokens)
		case ActPrefill:
			err = e.Prefill(ctx, a.Images)
		default:
			err = fmt.Errorf("unknown action kind %q", a.Kind)
		}
		if err != nil {
			return fmt.Errorf("swap: action %d (%s): %w", i, a.Kind, err)
		}
	}
	return nil
}

// Policy is what the simulator drives: the Scheduler, or a baseline.
type Policy interface {
	// Launch picks the profile the engine starts in, from what is known before the first request.
	Launch(o Observation) (Profile, string)
	// Plan says what to do now.
	Plan(o Observation) []Action
}

// Scheduler is the swap policy. Only Costs is required; zero fields take the defaults named beside them.
type Scheduler struct {
	Costs  Costs
	Expect *Expect // the session's prior, nil when nothing is known
	// Pin fixes the profile (a static baseline): the scheduler still prefills and warms up, never relaunches.
	Pin Profile
	// Hysteresis: a relaunch must save this many times its own exposed cost over the horizon (default 1.5).
	Hysteresis float64
	// MinDwell is the steps after a relaunch before another unforced one (default 4).
	MinDwell int
	// Window is how many recent steps estimate the coming ones (default 24).
	Window int
	// MinHorizon is the fewest coming steps assumed: a session is expected to last about as long again as it
	// has so far, and at least this (default 8).
	MinHorizon int
	// PriorWeight is how many steps the prior counts as against observed ones (default 8).
	PriorWeight float64
}

func (s Scheduler) hysteresis() float64 { return cmp0(s.Hysteresis, 1.5) }
func (s Scheduler) minDwell() int       { return int(cmp0(float64(s.MinDwell), 4)) }
func (s Scheduler) window() int         { return int(cmp0(float64(s.Window), 24)) }
func (s Scheduler) minHorizon() int     { return int(cmp0(float64(s.MinHorizon), 8)) }
func (s Scheduler) priorWeight() float64 {
	return cmp0(s.PriorWeight, 8)
}

func cmp0(v, def float64) float64 {
	if v <= 0 {
		return def
	}
	return v
}

// Launch picks the starting profile: the one the prior expects to be fastest per step, else the engine's
// preferred profile.
func (s Scheduler) Launch(o Observation) (Profile, string) {
	if s.Pin != "" {
		return s.Pin, fmt.Sprintf("static baseline pinned to %s", s.Pin)
	}
	def := s.Costs.Profiles[0]
	if s.Expect == nil && len(o.Pending) == 0 && o.Announced == 0 {
		return def, fmt.Sprintf("nothing known about the workload: the engine's preferred profile %s", def)
	}
	o.Profile = def
	costs := s.perStep(o)
	best := s.best(o, costs)
	if costs[best] == never {
		return def, fmt.Sprintf("no profile can serve the expected images: starting in %s", def)
	}
	return best, fmt.Sprintf("expected %s per step in %s (%s)", costs[best].Round(time.Millisecond), best,
		s.compare(costs, best))
}

// Plan says what to do now: relaunch when it pays, evaluate the known prefix, prefill the known images as one
// run, warm the image pipelines while nothing else needs the engine.
func (s Scheduler) Plan(o Observation) []Action {
	var acts []Action
	prof := o.Profile
	if s.Pin == "" {
		if to, why, ok := s.choose(o); ok {
			acts = append(acts, Action{Kind: ActRelaunch, Profile: to, Reason: why})
			prof = to
		}
	}
	if o.Ready {
		return acts // the request itself now evaluates what is left
	}
	if o.ColdPrefix > 0 {
		acts = append(acts, Action{Kind: ActWarmPrompt, Tokens: o.ColdPrefix, Reason: fmt.Sprintf(
			"the first request's %d-token prefix is known: evaluate it now (%s) instead of with the request",
			o.ColdPrefix, s.Costs.Prefill(o.ColdPrefix).Round(time.Millisecond))})
	}
	prefilling := false
	if len(o.Pending) > 0 && prof.TakesImages() {
		ids, tokens := make([]int, len(o.Pending)), 0
		for i, im := range o.Pending {
			ids[i], tokens = im.ID, tokens+im.Tokens
		}
		enc, sw := s.Costs.Encode(prof, tokens), s.Costs.Swap(prof)
		switch {
		case o.Announced > 0 && sw > 0 && enc < sw:
			// Wait for the announced images: encoding these alone would cost another swap than it hides.
		default:
			prefilling = true
			why := fmt.Sprintf("%d known image(s), %d tokens, before the request: encode now (%s", len(ids), tokens,
				enc.Round(time.Millisecond))
			if sw > 0 {
				why += fmt.Sprintf(" + one %s swap for the run", sw.Round(time.Millisecond))
			}
			if !o.Compiled && s.Costs.Compiles(prof) {
				why += fmt.Sprintf(" + the one-time %s pipeline compile", s.Costs.PipelineCompile.D().Round(time.Millisecond))
			}
			why += "), so the request finds them encoded"
			if o.Queued > 0 {
				why += fmt.Sprintf("; the request is number %d in the engine's queue: in the first free server slot", o.Queued)
			}
			if o.Announced > 0 {
				why += fmt.Sprintf("; %d more announced, their own run later", o.Announced)
			}
			acts = append(acts, Action{Kind: ActPrefill, Images: ids, Reason: why})
		}
	}
	if !prefilling && !o.Compiled && s.Costs.Compiles(prof) && s.expectsImages(o) {
		tokens := s.warmTokens(o)
		acts = append(acts, Action{Kind: ActWarmPipeline, Tokens: tokens, Reason: fmt.Sprintf(
			"images are expected and the first one after an install compiles GPU pipelines (%s): do it now with a "+
				"%d-token image (the size expected), while the engine is idle", s.Costs.PipelineCompile.D().Round(time.Millisecond), tokens)})
	}
	return acts
}

func (s Scheduler) expectsImages(o Observation) bool {
	if len(o.Pending) > 0 || o.Announced > 0 || o.Context.Images > 0 {
		return true
	}
	if s.Expect != nil && s.Expect.ImagesPerStep > 0 {
		return true
	}
	for _, r := range s.recent(o) {
		if len(r.Images) > 0 {
			return true
		}
	}
	return s.Expect == nil && len(o.History) == 0 // nothing known: the session may well send one
}

// warmTokens is the size of the warm-up image: the budget (intake sizes large images to it), or the prior's.
func (s Scheduler) warmTokens(o Observation) int {
	n := 1024 // a 1024² screenshot when nothing better is known
	if s.Expect != nil && s.Expect.ImageTokens > 0 {
		n = s.Expect.ImageTokens
	} else {
		h := s.recent(o)
		for i := len(h) - 1; i >= 0; i-- {
			if k := len(h[i].Images); k > 0 {
				n = h[i].Images[k-1].Tokens
				break
			}
		}
	}
	if b := s.Costs.ImageTokenBudget; b > 0 {
		n = min(n, b)
	}
	return n
}

// Intake sizes a new image once, to the plan's encoder budget (Costs.ImageTokenBudget), and says why. Every
// later turn sends the same bytes, so the image cache keeps hitting, and the encoder sees few shapes, so one
// warm-up covers them.
func (s Scheduler) Intake(width, height int) (w, h, tokens int, reason string) {
	w, h, tokens = SizeImage(width, height, s.Costs.ImageTokenBudget)
	if w == width && h == height {
		return w, h, tokens, fmt.Sprintf("%d×%d is %d image tokens, within the %d-token budget: kept", width, height,
			tokens, s.Costs.ImageTokenBudget)
	}
	return w, h, tokens, fmt.Sprintf("%d×%d would be %d image tokens: resized to %d×%d (%d tokens) for the %d-token "+
		"encoder budget", width, height, ImageTokens(width, height), w, h, tokens, s.Costs.ImageTokenBudget)
}

// recent are the finished steps that estimate the coming ones: the last Window.
func (s Scheduler) recent(o Observation) []StepRecord {
	if h := o.History; len(h) > s.window() {
		return h[len(h)-s.window():]
	}
	return o.History
}

// weighted is a step standing for the coming ones, with its weight.
type weighted struct {
	r StepRecord
	w float64
}

// samples are the steps that estimate the coming ones: the recent history and the prior.
func (s Scheduler) samples(o Observation) []weighted {
	var out []weighted
	for _, r := range s.recent(o) {
		out = append(out, weighted{r, 1})
	}
	if e := s.Expect; e != nil {
		w := s.priorWeight()
		rec := StepRecord{OutputTokens: e.OutputTokens, Wait: e.Wait.D(), Acceptance: -1}
		tokens := e.ImageTokens
		if tokens == 0 {
			tokens = min(max(s.Costs.ImageTokenBudget, 1), 1024)
		}
		img := ImageRecord{Tokens: tokens, Lead: e.ImageLead.D()}
		switch n := e.ImagesPerStep; {
		case n <= 0:
			out = append(out, weighted{rec, w})
		case n < 1:
			with := rec
			with.Images = []ImageRecord{img}
			out = append(out, weighted{with, w * n}, weighted{rec, w * (1 - n)})
		default:
			with := rec
			for range int(math.Round(n)) {
				with.Images = append(with.Images, img)
			}
			out = append(out, weighted{with, w})
		}
	}
	return out
}

// stepCost is what one step like r puts on the critical path in p: generation plus the image work its lead
// time does not hide. Text prefill costs the same everywhere and is left out.
func (s Scheduler) stepCost(p Profile, r StepRecord) time.Duration {
	d := s.Costs.Generate(p, r.OutputTokens, r.Acceptance)
	if len(r.Images) == 0 {
		return d
	}
	if !p.TakesImages() {
		return never
	}
	tokens, lead := 0, never
	for _, im := range r.Images {
		tokens += im.Tokens
		lead = min(lead, im.Lead) // the run can start only once its last image is known
	}
	work := s.Costs.Encode(p, tokens)
	if p == VisionEndpoint {
		work = s.Costs.Encode(p, tokens/len(r.Images)) // one description per image, side by side on the endpoint
		d += s.Costs.Prefill(len(r.Images) * s.Costs.captionTokens())
	} else {
		work += s.Costs.Swap(p)
	}
	return d + max(0, work-lead)
}

// perStep is the expected critical-path time per coming step in each available profile; +Inf where a
// profile cannot serve them (images in a text-only engine) or cannot be entered (text-only with images in the
// conversation).
func (s Scheduler) perStep(o Observation) map[Profile]time.Duration {
	samples := s.samples(o)
	out := map[Profile]time.Duration{}
	for _, p := range s.Costs.Profiles {
		if !p.Vision() && o.Context.Images > 0 && p != o.Profile {
			out[p] = never
			continue
		}
		if !p.TakesImages() && (len(o.Pending) > 0 || o.Announced > 0) {
			out[p] = never
			continue
		}
		var sum, wsum float64
		inf := false
		for _, w := range samples {
			c := s.stepCost(p, w.r)
			if c == never {
				if w.w > 0 {
					inf = true
				}
				continue
			}
			sum += w.w * float64(c)
			wsum += w.w
		}
		switch {
		case inf:
			out[p] = never
		case wsum == 0:
			out[p] = 0
		default:
			out[p] = time.Duration(sum / wsum)
		}
	}
	return out
}

// best is the cheapest profile; ties go to the current one, then to the engine's preference order.
func (s Scheduler) best(o Observation, costs map[Profile]time.Duration) Profile {
	best := o.Profile
	if _, ok := costs[best]; !ok {
		best = s.Costs.Profiles[0]
	}
	for _, p := range s.Costs.Profiles {
		if costs[p] < costs[best] {
			best = p
		}
	}
	return best
}

func (s Scheduler) compare(costs map[Profile]time.Duration, chosen Profile) string {
	var parts []string
	for _, p := range s.Costs.Profiles {
		if p == chosen {
			continue
		}
		if c := costs[p]; c == never {
			parts = append(parts, fmt.Sprintf("%s cannot", p))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s", p, c.Round(time.Millisecond)))
		}
	}
	if len(parts) == 0 {
		return "the only profile"
	}
	return "vs " + strings.Join(parts, ", ")
}

// SwitchCost is what a relaunch into to would put on the critical path now: the restart and the conversation's
// evaluation again (images encoded again), less the wait it is expected to hide in (a low estimate from the
// recent waits).
func (s Scheduler) SwitchCost(o Observation, to Profile) (total, exposed time.Duration) {
	total = s.Costs.Relaunch.D() + s.Costs.Prefill(o.Context.TextTokens)
	if o.Context.Images > 0 {
		total += s.Costs.Encode(to, o.Context.ImageTokens) + time.Duration(o.Context.Images)*s.Costs.Swap(to)
	}
	if o.Ready {
		return total, total
	}
	return total, max(0, total-s.lowWait(o))
}

// lowWait is the wait a relaunch started now can count on: the lower quartile of the recent waits.
func (s Scheduler) lowWait(o Observation) time.Duration {
	h := s.recent(o)
	if len(h) == 0 {
		if s.Expect != nil {
			return s.Expect.Wait.D() / 2
		}
		return 0
	}
	waits := make([]time.Duration, len(h))
	for i, r := range h {
		waits[i] = r.Wait
	}
	slices.Sort(waits)
	return waits[len(waits)/4]
}

// choose decides whether to relaunch now, and into what.
func (s Scheduler) choose(o Observation) (Profile, string, bool) {
	costs := s.perStep(o)
	needImages := len(o.Pending) > 0 || o.Announced > 0
	if needImages && !o.Profile.TakesImages() {
		best := s.best(o, costs)
		if !best.TakesImages() || costs[best] == never {
			return "", "", false // nothing can take them; the request will fail with the engine's error
		}
		total, exposed := s.SwitchCost(o, best)
		return best, fmt.Sprintf("the next request carries images and %s cannot take them: relaunch into %s, the "+
			"fastest that can (%s, about %s of it on the critical path)", o.Profile, best,
			total.Round(time.Millisecond), exposed.Round(time.Millisecond)), true
	}
	if o.Ready {
		return "", "", false // an unforced relaunch now would only add to the waiting request
	}
	// The launch counts as a switch: a few steps must be seen before the first unforced relaunch too.
	if len(o.History)-max(0, o.LastRelaunch) < s.minDwell() {
		return "", "", false
	}
	best := s.best(o, costs)
	cur := costs[o.Profile]
	if best == o.Profile || costs[best] == never {
		return "", "", false
	}
	if cur == never {
		cur = costs[best] * 2 // cannot serve what is expected: treat as far slower, still priced below
	}
	delta := cur - costs[best]
	if costs[o.Profile] != never {
		// Judge the saving by its lower confidence bound: a few unlike steps (two screenshots, then long
		// answers) are weak evidence, a run of like ones is strong.
		delta = s.savingLowerBound(o, o.Profile, best)
	}
	if float64(delta) < 0.01*float64(cur) {
		return "", "", false
	}
	horizon := max(s.minHorizon(), len(o.History))
	gain := delta * time.Duration(horizon)
	total, exposed := s.SwitchCost(o, best)
	need := time.Duration(s.hysteresis()*float64(exposed)) + time.Second
	if gain <= need {
		return "", "", false
	}
	return best, fmt.Sprintf("%s is expected to save %s per step over %s (%s over the next ~%d steps), more than "+
		"%.1f× the relaunch's %s on the critical path (of %s, the rest hidden in the wait)", best,
		delta.Round(time.Millisecond), o.Profile, gain.Round(time.Millisecond), horizon, s.hysteresis(),
		exposed.Round(time.Millisecond), total.Round(time.Millisecond)), true
}

// savingLowerBound is the per-step saving of to over from, less one standard error: the weighted mean of the
// samples' savings minus their spread over the square root of their effective number.
func (s Scheduler) savingLowerBound(o Observation, from, to Profile) time.Duration {
	var sw, sw2, sum, sum2 float64
	for _, w := range s.samples(o) {
		a, b := s.stepCost(from, w.r), s.stepCost(to, w.r)
		if a == never || b == never || w.w <= 0 {
			continue
		}
		d := float64(a - b)
		sw, sw2, sum, sum2 = sw+w.w, sw2+w.w*w.w, sum+w.w*d, sum2+w.w*d*d
	}
	if sw == 0 {
		return 0
	}
	mean := sum / sw
	variance := max(0, sum2/sw-mean*mean)
	neff := sw * sw / sw2
	return time.Duration(mean - math.Sqrt(variance/neff))
}

// Reactive is the fork's own behaviour, the baseline: start in the engine's preferred profile, never prefill
// or warm up, encode (and swap) each image run when its request arrives; relaunch only when a request carries
// images the profile cannot take.
type Reactive struct{ Costs Costs }

// Launch starts in the engine's preferred profile.
func (r Reactive) Launch(Observation) (Profile, string) {
	return r.Costs.Profiles[0], "reactive: the engine's preferred profile"
}

// Plan only relaunches when a waiting request cannot be served.
func (r Reactive) Plan(o Observation) []Action {
	if !o.Ready || len(o.Pending) == 0 || o.Profile.TakesImages() {
		return nil
	}
	for _, p := range r.Costs.Profiles {
		if p.TakesImages() {
			return []Action{{Kind: ActRelaunch, Profile: p, Reason: "reactive: the request carries images"}}
		}
	}
	return nil
}

// never is the cost of a profile that cannot serve the coming steps.
const never = time.Duration(math.MaxInt64)
