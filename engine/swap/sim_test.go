package swap_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

func loadTraces(t *testing.T) map[string]swap.Trace {
	t.Helper()
	paths, err := filepath.Glob("testdata/traces/*.json")
	if err != nil || len(paths) < 5 {
		t.Fatalf("shipped traces: %v %v", paths, err)
	}
	out := map[string]swap.Trace{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := swap.ParseTrace(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = tr
	}
	return out
}

// The acceptance, on every shipped trace with the seed's costs and §9's: the scheduler is within 2% of
// the static profile chosen with hindsight, better than the fork's reactive behaviour, and hides ≥ 90% of the
// swap+encode time of images known at least one swap+encode ahead.
func TestShippedTracesAcceptance(t *testing.T) {
	traces := loadTraces(t)
	for name, c := range swap.Presets() {
		for file, tr := range traces {
			t.Run(name+"/"+file, func(t *testing.T) {
				rep, err := swap.Compare(tr, c)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				if err := rep.WriteTable(&b); err != nil {
					t.Fatal(err)
				}
				t.Log("\n" + b.String())
				s, _ := rep.Result(swap.NameScheduler)
				if !s.Served {
					t.Fatalf("scheduler could not serve the trace: %s", s.Why)
				}
				if rep.VsBestStatic > 0.02 {
					t.Errorf("scheduler %.2f%% slower than the best static profile (%s)", 100*rep.VsBestStatic, rep.BestStatic)
				}
				if rep.VsReactive >= 0 {
					t.Errorf("scheduler not better than reactive: %+.2f%%", 100*rep.VsReactive)
				}
				if s.ImagesAhead > 0 && s.ImageAhead.HiddenShare() < 0.9 {
					t.Errorf("%d images known ahead: only %.1f%% of their swap+encode hidden", s.ImagesAhead,
						100*s.ImageAhead.HiddenShare())
				}
				for _, ev := range s.Events {
					if ev.Action.Reason == "" {
						t.Errorf("action without a reason: %+v", ev)
					}
				}
			})
		}
	}
}

// One request, one image known 10 s ahead, on costs small enough to check by hand.
func TestSimulateArithmetic(t *testing.T) {
	c := swap.SeedCosts()
	tr := swap.Trace{Name: "one", Steps: []swap.Step{{User: swap.Duration(10 * time.Second), PromptTokens: 350,
		OutputTokens: 487, Images: []swap.TraceImage{{Tokens: 1000, KnownAhead: swap.Duration(10 * time.Second)}}}}}
	out, tps := 487.0, 243.59
	gen := time.Duration(out / tps * float64(time.Second))
	prompt := time.Duration(350 / 3500.0 * float64(time.Second)) // 100 ms
	imageWork := 753*time.Millisecond + 1500*time.Millisecond
	s, err := swap.Simulate(tr, c, "s", swap.Scheduler{Costs: c})
	if err != nil {
		t.Fatal(err)
	}
	if s.EngineWait != prompt+gen || s.Image.Hidden != imageWork || s.Image.Exposed != 0 || s.ImagesAhead != 1 {
		t.Fatalf("scheduler: wait %s (want %s), image %+v (want %s hidden)", s.EngineWait, prompt+gen, s.Image, imageWork)
	}
	r, err := swap.Simulate(tr, c, "r", swap.Reactive{Costs: c})
	if err != nil {
		t.Fatal(err)
	}
	if r.EngineWait != imageWork+prompt+gen || r.Image.Exposed != imageWork {
		t.Fatalf("reactive: wait %s (want %s), image %+v", r.EngineWait, imageWork+prompt+gen, r.Image)
	}
	// Known only 1 s ahead: the prefill starts then and the request waits for the other 1.253 s.
	tr.Steps[0].Images[0].KnownAhead = swap.Duration(time.Second)
	s, err = swap.Simulate(tr, c, "s", swap.Scheduler{Costs: c})
	if err != nil {
		t.Fatal(err)
	}
	if s.Image.Hidden != time.Second || s.Image.Exposed != imageWork-time.Second || s.ImagesAhead != 0 {
		t.Fatalf("1 s ahead: %+v, %d ahead", s.Image, s.ImagesAhead)
	}
}

// spy records what a policy was shown.
type spy struct {
	swap.Policy
	seen []swap.Observation
}

func (s *spy) Launch(o swap.Observation) (swap.Profile, string) {
	s.seen = append(s.seen, o)
	return s.Policy.Launch(o)
}

func (s *spy) Plan(o swap.Observation) []swap.Action {
	s.seen = append(s.seen, o)
	return s.Policy.Plan(o)
}

// The scheduler must not see the future: two traces that differ only from step k on must produce the same
// observations and the same decisions until step k's wait begins.
func TestSimulatorShowsNoFuture(t *testing.T) {
	base := loadTraces(t)["mixed-day.json"]
	changed := base
	changed.Steps = append([]swap.Step(nil), base.Steps...)
	// Step index 12 (the computer-use task) gets more output and a second, huge image known long before.
	k := 12
	changed.Steps[k].OutputTokens *= 5
	changed.Steps[k].Images = append(append([]swap.TraceImage(nil), changed.Steps[k].Images...),
		swap.TraceImage{Tokens: 4000, KnownAhead: swap.Duration(time.Hour)})
	c := swap.SeedCosts()
	run := func(tr swap.Trace) (*spy, swap.Result) {
		sp := &spy{Policy: swap.Scheduler{Costs: c, Expect: tr.Expect}}
		res, err := swap.Simulate(tr, c, "spy", sp)
		if err != nil {
			t.Fatal(err)
		}
		return sp, res
	}
	a, ra := run(base)
	b, rb := run(changed)
	// The first expanded step of base.Steps[k].
	first := 0
	for _, s := range base.Steps[:k] {
		first += max(1, s.Repeat)
	}
	n := 0
	for n < len(a.seen) && n < len(b.seen) && len(a.seen[n].History) < first {
		if !reflect.DeepEqual(a.seen[n], b.seen[n]) {
			t.Fatalf("observation %d differs before step %d:\n%+v\n%+v", n, first, a.seen[n], b.seen[n])
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d observations compared", n)
	}
	for i := range ra.Events {
		if ra.Events[i].Step >= first {
			break
		}
		if !reflect.DeepEqual(ra.Events[i], rb.Events[i]) {
			t.Fatalf("event %d differs before step %d: %+v vs %+v", i, first, ra.Events[i], rb.Events[i])
		}
	}
	// And the change is visible once its step begins: the image known "an hour ahead" is pending at once.
	found := false
	for _, o := range b.seen[n:] {
		for _, p := range o.Pending {
			if len(o.History) == first && p.Tokens == 4000 {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("the changed step's images never showed up as pending")
	}
	// No observation ever holds an image before the moment the trace makes it known.
	for _, o := range append(a.seen, b.seen...) {
		for _, p := range o.Pending {
			if p.Known > o.Now {
				t.Fatalf("image %d shown at %s, known only at %s", p.ID, o.Now, p.Known)
			}
		}
	}
}

// thrashCosts make each phase of a phased trace prefer a different profile: screenshots known late want the
// projector resident (no swap per image), long text answers want MTP.
func thrashCosts() swap.Costs {
	c := swap.SeedCosts()
	c.Source = "test: phases prefer different profiles"
	c.Profiles = []swap.Profile{swap.MTPSwap, swap.VisionNoMTP}
	c.SwapIn, c.SwapOut = swap.Duration(2*time.Second), swap.Duration(2*time.Second)
	c.Relaunch = swap.Duration(4 * time.Second)
	return c
}

func phased(phaseLen, phases int) swap.Trace {
	tr := swap.Trace{Name: "phased", SystemTokens: 1000}
	// Each phase is a new session, so a relaunch at its start has no conversation to evaluate again.
	for i := range phases {
		first := swap.Step{NewSession: true, User: swap.Duration(10 * time.Second), PromptTokens: 100, OutputTokens: 300}
		if i%2 == 0 {
			tr.Steps = append(tr.Steps, first, swap.Step{Repeat: phaseLen, Tools: swap.Duration(2 * time.Second),
				PromptTokens: 40, OutputTokens: 150, Images: []swap.TraceImage{{Tokens: 1000}}})
		} else {
			tr.Steps = append(tr.Steps, first, swap.Step{Repeat: phaseLen, Tools: swap.Duration(8 * time.Second),
				PromptTokens: 300, OutputTokens: 1200})
		}
	}
	return tr
}

// Relaunch only when it pays: long phases are worth a switch each and beat every static profile; phases of two
// steps are not, and the scheduler must not bounce between profiles.
func TestRelaunchPaysAndDoesNotThrash(t *testing.T) {
	c := thrashCosts()
	long, err := swap.Compare(phased(40, 4), c)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := long.Result(swap.NameScheduler)
	var b strings.Builder
	_ = long.WriteTable(&b)
	_ = swap.WriteExplain(&b, s)
	t.Log("\n" + b.String())
	if s.Relaunches < 2 || s.Relaunches > 4 {
		t.Errorf("long phases: %d relaunches, want one per phase change or so (2–4)", s.Relaunches)
	}
	if long.VsBestStatic >= 0 {
		t.Errorf("long phases: switching should beat the best static profile, got %+.2f%%", 100*long.VsBestStatic)
	}
	short, err := swap.Compare(phased(2, 40), c)
	if err != nil {
		t.Fatal(err)
	}
	s, _ = short.Result(swap.NameScheduler)
	if s.Relaunches > 2 {
		b.Reset()
		_ = swap.WriteExplain(&b, s)
		t.Errorf("short phases: %d relaunches (thrashing):\n%s", s.Relaunches, b.String())
	}
	if short.VsBestStatic > 0.02 {
		t.Errorf("short phases: %.2f%% slower than the best static profile", 100*short.VsBestStatic)
	}
	// The same trace without hysteresis or dwell does bounce: the bound above is what they buy.
	eager, err := swap.Simulate(phased(2, 40), c, "eager", swap.Scheduler{Costs: c, Hysteresis: 1e-9, MinDwell: 1, Window: 2})
	if err != nil {
		t.Fatal(err)
	}
	if eager.Relaunches <= 2 {
		t.Errorf("without hysteresis the short phases caused only %d relaunches: the test shows nothing", eager.Relaunches)
	}
	t.Logf("short phases: %d relaunches with hysteresis, %d without", s.Relaunches, eager.Relaunches)
}

func TestParseTraceErrors(t *testing.T) {
	cases := map[string]string{
		`{"name":"x","steps":[]}`: "at least one request",
		`{"name":"x","steps":[{"prompt_tokens":1,"output_tokens":1,"images":[{"tokens":10,"known_ahead":"2s","announced_ahead":"1s"}]}]}`: "steps[0].images[0]: announced_ahead",
		`{"name":"x","steps":[{"prompt_tokens":-1,"output_tokens":1}]}`:                                                                   "steps[0]",
		`{"name":"x","steps":[{"prompt_tokens":1,"output_tokens":1,"user":5}]}`:                                                           "durations as strings",
		`{"name":"x","steps":[{"prompt_tokens":1,"output_tokens":1,"wait":"5s"}]}`:                                                        "unknown field",
		`{"name":"x","steps":[{"prompt_tokens":1,"output_tokens":1,"images":[{}]}]}`:                                                      "give tokens, or width and height",
		`{"name":"x","steps":[{"repeat":100001,"prompt_tokens":1,"output_tokens":1}]}`:                                                    "repeat",
	}
	for in, want := range cases {
		_, err := swap.ParseTrace([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want it to mention %q", in, err, want)
		}
	}
}

func TestSizeImage(t *testing.T) {
	if w, h, n := swap.SizeImage(1920, 1080, 4096); w != 1920 || h != 1080 || n != 2040 {
		t.Fatalf("1080p within budget: %d×%d %d tokens", w, h, n)
	}
	for _, budget := range []int{4096, 1024, 286} {
		w, h, n := swap.SizeImage(4032, 3024, budget)
		if n > budget || n < budget*8/10 {
			t.Errorf("budget %d: %d×%d is %d tokens", budget, w, h, n)
		}
		if r := float64(w) / float64(h); r < 1.25 || r > 1.42 {
			t.Errorf("budget %d: %d×%d lost the 4:3 aspect", budget, w, h)
		}
	}
}

// A second endpoint describes images beside the engine: known ahead, the description is ready with the request.
func TestVisionEndpoint(t *testing.T) {
	c := swap.SeedCosts()
	c.Profiles = []swap.Profile{swap.VisionEndpoint, swap.TextOnly}
	c.Endpoint = &swap.Endpoint{Latency: swap.Duration(100 * time.Millisecond), EncodePerToken: swap.Duration(time.Millisecond),
		TokensPerSecond: 100, CaptionTokens: 100}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tr := swap.Trace{Name: "ep", Steps: []swap.Step{{User: swap.Duration(5 * time.Second), PromptTokens: 250, OutputTokens: 0,
		Images: []swap.TraceImage{{Tokens: 1000, KnownAhead: swap.Duration(5 * time.Second)}}}}}
	describe := 100*time.Millisecond + time.Second + time.Second
	prompt := c.Prefill(350) // the text and the description
	s, err := swap.Simulate(tr, c, "s", swap.Scheduler{Costs: c})
	if err != nil {
		t.Fatal(err)
	}
	if s.EngineWait != prompt || s.Image.Hidden != describe || s.Image.Exposed != 0 {
		t.Fatalf("scheduler: wait %s (want %s), image %+v", s.EngineWait, prompt, s.Image)
	}
	r, err := swap.Simulate(tr, c, "r", swap.Reactive{Costs: c})
	if err != nil {
		t.Fatal(err)
	}
	if r.EngineWait != describe+prompt || r.Image.Exposed != describe {
		t.Fatalf("reactive: wait %s (want %s), image %+v", r.EngineWait, describe+prompt, r.Image)
	}
}

// A trace whose sums would overflow is refused with the fix, not replayed into nonsense.
func TestSimulateRefusesOutsizedTraces(t *testing.T) {
	var imgs []swap.TraceImage
	for range 64 {
		imgs = append(imgs, swap.TraceImage{Tokens: 1_000_000})
	}
	tr := swap.Trace{Name: "huge", Steps: []swap.Step{{Repeat: 10, PromptTokens: 1_000_000, OutputTokens: 1_000_000, Images: imgs}}}
	_, err := swap.Simulate(tr, swap.SeedCosts(), "s", swap.Reactive{Costs: swap.SeedCosts()})
	if err == nil || !strings.Contains(err.Error(), "new_session") {
		t.Fatalf("err %v", err)
	}
	tr.Steps[0].PromptTokens = 1_000_001
	if err := tr.Validate(); err == nil || !strings.Contains(err.Error(), "steps[0]") {
		t.Fatalf("validate: %v", err)
	}
}
