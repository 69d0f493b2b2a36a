package vram

import (
	"context"
	"strings"
	"testing"
)

func TestCandidates(t *testing.T) {
	t.Parallel()
	// m builds a mode verdict: fits at the requested 32K, or only up to maxCtx.
	m := func(mode Mode, avail, fits bool, maxCtx int) ModePlan {
		return ModePlan{Mode: mode, Available: avail, Fits: fits, Ctx: 32768, MaxCtx: maxCtx}
	}
	cases := []struct {
		name  string
		modes []ModePlan
		want  string // "mode@ctx" list
	}{
		{"all fit: resident first", []ModePlan{
			m(ModeResident, true, true, 32768), m(ModeSwap, true, true, 32768), m(ModeVisionCPU, true, true, 32768),
			m(ModeTextOnly, true, true, 32768), m(ModeVisionNoMTP, true, true, 32768)},
			"resident@32768 mtp-swap@32768 vision-cpu@32768 vision-no-mtp@32768 text-only@32768"},
		{"plan order does not matter", []ModePlan{
			m(ModeTextOnly, true, true, 32768), m(ModeVisionNoMTP, true, true, 32768), m(ModeVisionCPU, true, true, 32768)},
			"vision-cpu@32768 vision-no-mtp@32768 text-only@32768"},
		{"full context before features", []ModePlan{
			m(ModeResident, true, false, 20480), m(ModeSwap, true, false, 24576), m(ModeVisionCPU, true, false, 30720),
			m(ModeTextOnly, true, true, 32768), m(ModeVisionNoMTP, true, false, 16384)},
			"text-only@32768 resident@20480 mtp-swap@24576 vision-cpu@30720 vision-no-mtp@16384"},
		{"unavailable swap is skipped", []ModePlan{
			m(ModeResident, true, false, 20480), m(ModeSwap, false, true, 32768), m(ModeVisionCPU, true, true, 32768)},
			"vision-cpu@32768 resident@20480"},
		{"too small a reduced context is no candidate", []ModePlan{
			m(ModeResident, true, false, MinUsefulCtx-256), m(ModeTextOnly, true, false, MinUsefulCtx)},
			"text-only@4096"},
		{"nothing fits", []ModePlan{m(ModeResident, true, false, 0), m(ModeTextOnly, true, false, 0)}, ""},
		{"no modes", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{Modes: tc.modes}
			var got []string
			for _, c := range r.Candidates() {
				got = append(got, string(c.Mode)+"@"+itoa(c.LaunchCtx()))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("candidates = %q, want %q", g, tc.want)
			}
			rec, ok := r.Recommended()
			if first, _, _ := strings.Cut(tc.want, "@"); ok != (tc.want != "") || ok && string(rec.Mode) != first {
				t.Errorf("recommended = %s, %v; want %q", rec.Mode, ok, first)
			}
		})
	}
}

// TestBlogRecommendation: on the blog's 24 GB card everything resident does not fit at 262K. With the fork the
// swap mode keeps vision and MTP at the full context, so it is recommended. Upstream, vision-cpu is: it keeps
// the 262K the user asked for and MTP's decode speed, giving up only fast image encodes, where the alternative
// (resident at about 213K) would silently cut the context by a fifth.
func TestBlogRecommendation(t *testing.T) {
	t.Parallel()
	model, mmproj := blogFiles(t)
	for _, tc := range []struct {
		swap bool
		want []Mode
	}{
		{true, []Mode{ModeSwap, ModeVisionCPU, ModeVisionNoMTP, ModeTextOnly, ModeResident}},
		{false, []Mode{ModeVisionCPU, ModeVisionNoMTP, ModeTextOnly, ModeResident}},
	} {
		o := blogOptions()
		o.SwapSupported = tc.swap
		res, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, Source: blogGPU, Options: o})
		if err != nil {
			t.Fatal(err)
		}
		cands := res.Candidates()
		var got []Mode
		for _, c := range cands {
			got = append(got, c.Mode)
		}
		if strings.Join(modeStrings(got), " ") != strings.Join(modeStrings(tc.want), " ") {
			t.Errorf("swap=%v: candidates %v, want %v", tc.swap, got, tc.want)
			continue
		}
		last := cands[len(cands)-1]
		if last.Fits || last.LaunchCtx() != last.MaxCtx || !strings.Contains(strings.Join(last.Args, " "), "-c "+itoa(last.MaxCtx)) {
			t.Errorf("swap=%v: reduced resident should launch at its max ctx %d: %v", tc.swap, last.MaxCtx, last.Args)
		}
		tbl := tableOf(t, res)
		wantLine := "recommended: " + string(tc.want[0]) + " (ctx 262144)\n               llama-server " +
			strings.Join(cands[0].Args, " ")
		if !strings.Contains(tbl, wantLine) {
			t.Errorf("swap=%v: table lacks %q:\n%s", tc.swap, wantLine, tbl)
		}
	}
}

func TestTableWithoutRecommendation(t *testing.T) {
	t.Parallel()
	model, mmproj := blogFiles(t)
	res, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, GPU: "8GiB", Options: blogOptions()})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Candidates(); len(c) != 0 {
		t.Fatalf("a 17 GB model cannot fit in 8 GiB, got candidates %v", c)
	}
	tbl := tableOf(t, res)
	if !strings.Contains(tbl, "recommended: none") {
		t.Errorf("table should say nothing is recommended:\n%s", tbl)
	}
}

func modeStrings(ms []Mode) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m)
	}
	return out
}

// TestPreferPutsTheSchedulersChoiceFirst: a relaunch into a mode starts with it, keeping the others (in their
// usual order) as fallbacks for an out-of-memory exit.
func TestPreferPutsTheSchedulersChoiceFirst(t *testing.T) {
	t.Parallel()
	m := func(mode Mode) ModePlan {
		return ModePlan{Mode: mode, Available: true, Fits: true, Ctx: 32768, MaxCtx: 32768}
	}
	r := Result{Modes: []ModePlan{m(ModeResident), m(ModeVisionCPU), m(ModeTextOnly), m(ModeVisionNoMTP)}, Prefer: ModeTextOnly}
	var got []string
	for _, p := range r.Candidates() {
		got = append(got, string(p.Mode))
	}
	if want := "text-only resident vision-cpu vision-no-mtp"; strings.Join(got, " ") != want {
		t.Fatalf("candidates %v, want %s", got, want)
	}
}
