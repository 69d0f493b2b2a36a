package swap_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

// recorder is a fake Effects: it records the calls and can fail one kind.
type recorder struct {
	calls  []string
	failOn string
}

func (r *recorder) do(call string) error {
	r.calls = append(r.calls, call)
	if r.failOn != "" && strings.HasPrefix(call, r.failOn) {
		return errors.New("engine said no")
	}
	return nil
}

func (r *recorder) Relaunch(_ context.Context, to swap.Profile) error {
	return r.do("relaunch " + string(to))
}
func (r *recorder) WarmPrompt(_ context.Context, n int) error {
	return r.do(fmt.Sprint("warm-prompt ", n))
}
func (r *recorder) WarmPipeline(_ context.Context, n int) error {
	return r.do(fmt.Sprint("warm-pipeline ", n))
}
func (r *recorder) Prefill(_ context.Context, ids []int) error {
	return r.do(fmt.Sprint("prefill ", ids))
}

func plan(t *testing.T, s swap.Scheduler, o swap.Observation) []string {
	t.Helper()
	acts := s.Plan(o)
	for _, a := range acts {
		if a.Reason == "" {
			t.Fatalf("action without a reason: %+v", a)
		}
	}
	var r recorder
	if err := swap.Carry(context.Background(), &r, acts); err != nil {
		t.Fatal(err)
	}
	return r.calls
}

func TestPlanThroughEffects(t *testing.T) {
	seed, h200 := swap.SeedCosts(), swap.H200Costs()
	img := func(id, tokens int) swap.PendingImage { return swap.PendingImage{ID: id, Tokens: tokens} }
	cases := []struct {
		name string
		s    swap.Scheduler
		o    swap.Observation
		want []string
	}{
		{"start: evaluate the system prompt, compile the pipelines", swap.Scheduler{Costs: h200},
			swap.Observation{Profile: swap.Resident, ColdPrefix: 2000, LastRelaunch: -1},
			[]string{"warm-prompt 2000", "warm-pipeline 1024"}},
		{"no compile to warm on the CPU encoder, nor on CUDA", swap.Scheduler{Costs: seed},
			swap.Observation{Profile: swap.MTPSwap, ColdPrefix: 2000, LastRelaunch: -1},
			[]string{"warm-prompt 2000"}},
		{"a text-only prior does not warm pipelines", swap.Scheduler{Costs: h200, Expect: &swap.Expect{}},
			swap.Observation{Profile: swap.Resident, LastRelaunch: -1}, nil},
		{"known images: one run covers them (the prefill compiles)", swap.Scheduler{Costs: h200},
			swap.Observation{Profile: swap.Resident, Pending: []swap.PendingImage{img(3, 1000), img(4, 1000)}, LastRelaunch: -1},
			[]string{"prefill [3 4]"}},
		{"a small image alone waits for the announced ones: its own run would cost a swap", swap.Scheduler{Costs: seed},
			swap.Observation{Profile: swap.MTPSwap, Compiled: true, Pending: []swap.PendingImage{img(1, 200)}, Announced: 2, LastRelaunch: -1},
			nil},
		{"a large one goes now, the announced ones get their own run", swap.Scheduler{Costs: seed},
			swap.Observation{Profile: swap.MTPSwap, Compiled: true, Pending: []swap.PendingImage{img(1, 2000)}, Announced: 2, LastRelaunch: -1},
			[]string{"prefill [1]"}},
		{"without swaps nothing is worth waiting for", swap.Scheduler{Costs: h200},
			swap.Observation{Profile: swap.Resident, Compiled: true, Pending: []swap.PendingImage{img(1, 200)}, Announced: 2, LastRelaunch: -1},
			[]string{"prefill [1]"}},
		{"text-only and an image coming: relaunch ahead, then prefill", swap.Scheduler{Costs: seed},
			swap.Observation{Profile: swap.TextOnly, Pending: []swap.PendingImage{img(7, 1000)}, LastRelaunch: -1},
			[]string{"relaunch mtp-swap", "prefill [7]"}},
		{"a pinned profile never relaunches", swap.Scheduler{Costs: seed, Pin: swap.TextOnly},
			swap.Observation{Profile: swap.TextOnly, Pending: []swap.PendingImage{img(7, 1000)}, LastRelaunch: -1}, nil},
		{"a waiting request: only the relaunch it cannot do without", swap.Scheduler{Costs: seed},
			swap.Observation{Profile: swap.TextOnly, Ready: true, ColdPrefix: 100, Pending: []swap.PendingImage{img(7, 1000)}, LastRelaunch: -1},
			[]string{"relaunch mtp-swap"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan(t, tc.s, tc.o); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("calls %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCarryStopsAtFailure(t *testing.T) {
	r := &recorder{failOn: "relaunch"}
	err := swap.Carry(context.Background(), r, []swap.Action{
		{Kind: swap.ActWarmPrompt, Tokens: 10}, {Kind: swap.ActRelaunch, Profile: swap.Resident}, {Kind: swap.ActPrefill, Images: []int{1}},
	})
	if err == nil || !strings.Contains(err.Error(), "action 1 (relaunch)") || !strings.Contains(err.Error(), "engine said no") {
		t.Fatalf("err %v", err)
	}
	if len(r.calls) != 2 {
		t.Fatalf("calls after the failure: %q", r.calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := swap.Carry(ctx, &recorder{}, []swap.Action{{Kind: swap.ActWarmPrompt, Tokens: 1}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// steps builds a history of n like steps.
func steps(n int, r swap.StepRecord) []swap.StepRecord {
	out := make([]swap.StepRecord, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// The relaunch rule: only when the expected saving beats the relaunch and the conversation's evaluation again,
// counting what the wait hides.
func TestRelaunchRule(t *testing.T) {
	c := thrashCosts() // mtp-swap with 4 s swaps vs vision-no-mtp; relaunch 4 s
	s := swap.Scheduler{Costs: c}
	screenshot := swap.StepRecord{OutputTokens: 150, Wait: 2 * time.Second, Acceptance: -1,
		Images: []swap.ImageRecord{{Tokens: 1000}}}
	o := swap.Observation{Profile: swap.MTPSwap, Compiled: true, LastRelaunch: -1, History: steps(10, screenshot)}
	acts := s.Plan(o)
	if len(acts) != 1 || acts[0].Kind != swap.ActRelaunch || acts[0].Profile != swap.VisionNoMTP {
		t.Fatalf("ten late screenshots with 4 s swaps: %+v, want a relaunch into vision-no-mtp", acts)
	}
	if !strings.Contains(acts[0].Reason, "save") {
		t.Fatalf("reason %q does not say what it saves", acts[0].Reason)
	}
	// The same, but the conversation holds 60 images that would each be encoded again with a swap: stay.
	o.Context = swap.Context{TextTokens: 20000, ImageTokens: 60000, Images: 60}
	if acts := s.Plan(o); len(acts) != 0 {
		t.Fatalf("with 60 images to re-encode: %+v, want to stay", acts)
	}
	// Too soon after the last relaunch: stay.
	o.Context, o.LastRelaunch = swap.Context{}, 8
	if acts := s.Plan(o); len(acts) != 0 {
		t.Fatalf("two steps after a relaunch: %+v", acts)
	}
	// Screenshots known long ahead hide the swaps: MTP is the better profile, so stay.
	early := screenshot
	early.Images = []swap.ImageRecord{{Tokens: 1000, Lead: 20 * time.Second}}
	o = swap.Observation{Profile: swap.MTPSwap, Compiled: true, LastRelaunch: -1, History: steps(10, early)}
	if acts := s.Plan(o); len(acts) != 0 {
		t.Fatalf("early screenshots: %+v, want to stay on MTP", acts)
	}
	// The switch cost is what the wait does not hide.
	o.Context = swap.Context{TextTokens: 35000}
	total, exposed := s.SwitchCost(o, swap.VisionNoMTP)
	if total != 14*time.Second || exposed != 12*time.Second {
		t.Fatalf("switch cost %s total, %s exposed; want 14s (4 s + 35,000 tokens at 3,500/s) and 12s (2 s waits)", total, exposed)
	}
}

func TestLaunchUsesThePrior(t *testing.T) {
	seed := swap.SeedCosts()
	cases := []struct {
		expect *swap.Expect
		want   swap.Profile
	}{
		{nil, swap.MTPSwap},
		{&swap.Expect{OutputTokens: 500}, swap.VisionCPU}, // no images: as fast as text-only, and still takes one
		{&swap.Expect{ImagesPerStep: 1, ImageTokens: 1000, OutputTokens: 300}, swap.MTPSwap},
		// Many images known late and very short answers: the swap per run costs more than MTP saves.
		{&swap.Expect{ImagesPerStep: 1, ImageTokens: 1000, OutputTokens: 50}, swap.VisionNoMTP},
	}
	for _, tc := range cases {
		p, why := swap.Scheduler{Costs: seed, Expect: tc.expect}.Launch(swap.Observation{LastRelaunch: -1})
		if p != tc.want || why == "" {
			t.Errorf("prior %+v: launch %s (%s), want %s", tc.expect, p, why, tc.want)
		}
	}
}

// MTP with poor acceptance is slower than no speculation: long answers drafting badly move the engine off MTP.
func TestPoorAcceptanceLeavesMTP(t *testing.T) {
	c := swap.SeedCosts()
	s := swap.Scheduler{Costs: c}
	r := swap.StepRecord{OutputTokens: 1000, Wait: 5 * time.Second, Acceptance: 0}
	o := swap.Observation{Profile: swap.MTPSwap, Compiled: true, LastRelaunch: -1, History: steps(10, r)}
	acts := s.Plan(o)
	if len(acts) != 1 || acts[0].Profile != swap.VisionNoMTP {
		t.Fatalf("drafts all rejected: %+v, want a relaunch into vision-no-mtp", acts)
	}
	r.Acceptance = c.DraftAcceptance
	o.History = steps(10, r)
	if acts := s.Plan(o); len(acts) != 0 {
		t.Fatalf("drafts accepted as usual: %+v, want to stay", acts)
	}
}

func TestIntake(t *testing.T) {
	c := swap.SeedCosts()
	c.ImageTokenBudget = 1024
	w, h, n, why := swap.Scheduler{Costs: c}.Intake(1920, 1080)
	if n > 1024 || w >= 1920 || h >= 1080 || !strings.Contains(why, "1024") {
		t.Fatalf("intake: %d×%d %d tokens (%s)", w, h, n, why)
	}
}
