package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine"
)

// TestChecksFailEveryFailedTurn replays the H200 run where the engine aborted on the first image: the control
// run's turns failed and the warm-up run never served. Each failed turn must be a FAIL line of its own, naming
// its run and image, and so must the run that did not complete.
func TestChecksFailEveryFailedTurn(t *testing.T) {
	rep := Report{PlanMarginMiB: 1024, PlanTotalMiB: 20000, Runs: []Run{
		{Warmup: false, Mode: "resident", Turns: []Turn{
			{Image: "1440p-a", Err: "stream ended before the server finished: unexpected EOF"},
			{Image: "1440p-b", Err: "connection refused"},
			{Image: "1080p", TTFTSeconds: 1.2, MinFreeMiB: 900},
		}},
		{Warmup: true, Err: "visor serve exited before serving"},
	}}
	lines := checks(rep)
	want := []string{
		"FAIL  run 0 (without warm-up) image 1440p-a failed: stream ended",
		"FAIL  run 0 (without warm-up) image 1440p-b failed: connection refused",
		"FAIL  run 1 (with warm-up) did not complete: visor serve exited before serving",
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("no line %q in:\n%s", w, strings.Join(lines, "\n"))
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "1080p") {
			t.Errorf("the turn that worked is reported as failed: %s", l)
		}
		if strings.HasPrefix(l, "PASS") {
			t.Errorf("a PASS although the warm-up run never served: %s", l)
		}
	}
}

// TestChecksFailFailedTurnInCompleteRun: a warm-up run that completed but lost one turn still says which.
func TestChecksFailFailedTurnInCompleteRun(t *testing.T) {
	ok := Turn{Image: "1440p-a", TTFTSeconds: 1, MinFreeMiB: 1000}
	rep := Report{PlanMarginMiB: 1024, PlanTotalMiB: 20000, Runs: []Run{{Warmup: true, PeakUseMiB: 20100,
		Turns: []Turn{ok, {Image: "1440p-b", TTFTSeconds: 1, MinFreeMiB: 1000}, {Image: "1080p", Err: "HTTP 500: OOM"},
			{Image: "largest-2048", TTFTSeconds: 1, MinFreeMiB: 990}}, VisorTPS: []float64{100}, RawTPS: []float64{100}}}}
	lines := strings.Join(checks(rep), "\n")
	for _, w := range []string{"FAIL  run 0 (with warm-up) image 1080p failed: HTTP 500: OOM",
		"FAIL  no OOM or failed turn in the warm-up run", "PASS  plan 20000 MiB vs NVML peak use 20100 MiB"} {
		if !strings.Contains(lines, w) {
			t.Errorf("no %q in:\n%s", w, lines)
		}
	}
}

// TestTPSChecksBothRatios: the ratio of medians and the median of per-pair ratios are both held to 0.99. Here the
// medians are equal while visor lost two of three pairs by 12%: the per-pair line must fail. A -tps-only run
// reports only the tokens/s lines, and the server's own spread and accepted drafts.
func TestTPSChecksBothRatios(t *testing.T) {
	tim := func(tps float64) engine.Timings {
		return engine.Timings{PredictedN: 256, PredictedPerSecond: tps, DraftN: 255, DraftNAccepted: 255}
	}
	rep := Report{TPSOnly: true, Runs: []Run{{Warmup: true, Mode: "resident",
		VisorTPS: []float64{60, 70, 80}, RawTPS: []float64{70, 80, 60}, ServerTPS: []float64{60, 70, 80},
		RawServerTPS: []float64{70, 80, 60}, VisorTimings: []engine.Timings{tim(60), tim(70), tim(80)},
		RawTimings: []engine.Timings{tim(70), tim(80), tim(60)}}}}
	lines := strings.Join(checks(rep), "\n")
	for _, w := range []string{
		"PASS  visor streamed 70.0 tokens/s vs raw HTTP 70.0, medians of 3 alternating pairs (≥ 0.99×: ratio of medians 1.000)",
		"FAIL  visor / raw tokens/s per pair: median 0.875 of 3 pairs (≥ 0.99; pairs 0.857–1.333)",
		"info  server's own rate over the 6 requests: 60.0–80.0 tokens/s (spread 33.3%); drafts accepted: 255/255 ×6",
	} {
		if !strings.Contains(lines, w) {
			t.Errorf("no %q in:\n%s", w, lines)
		}
	}
	if strings.Contains(lines, "plan ") || strings.Contains(lines, "TTFT") {
		t.Errorf("a -tps-only run reports image checks:\n%s", lines)
	}
	rep.Runs[0].VisorTPS = []float64{69.5, 79.5, 59.6}
	lines = strings.Join(checks(rep), "\n")
	if strings.Contains(lines, "FAIL") || strings.Contains(lines, "concurrent") {
		t.Errorf("visor within 1%% of raw in every pair, no concurrent pairs, yet a FAIL or a concurrent line:\n%s", lines)
	}
	// Concurrent pairs are held to the same 0.99, pair by pair.
	rep.Runs[0].ConcVisorTPS, rep.Runs[0].ConcRawTPS = []float64{50, 51, 52}, []float64{50.2, 51, 51.9}
	if lines = strings.Join(checks(rep), "\n"); !strings.Contains(lines, "PASS  concurrent pairs") {
		t.Errorf("concurrent pairs within 1%%, no PASS:\n%s", lines)
	}
	rep.Runs[0].ConcVisorTPS = []float64{48, 49, 52}
	if lines = strings.Join(checks(rep), "\n"); !strings.Contains(lines, "FAIL  concurrent pairs") {
		t.Errorf("concurrent pairs 4%% slower in two of three, no FAIL:\n%s", lines)
	}
}

// TestPooledH200Runs pools the tokens/s pairs of the four H200 runs of 2026-12-01 (after visor's client read the
// stream itself; testdata/h200-tps, trimmed to the tokens/s fields) as `seedcheck -pool` does, and holds them to
// the numbers the closing note cites, so a change to the statistics cannot move them unseen.
func TestPooledH200Runs(t *testing.T) {
	files, err := filepath.Glob("testdata/h200-tps/*.json")
	if err != nil || len(files) != 4 {
		t.Fatalf("recorded runs: %v %v", files, err)
	}
	lines, err := pooled(files)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(lines, "\n")
	for _, w := range []string{
		"PASS  visor streamed 57.9 tokens/s vs raw HTTP 57.6, medians of 220 alternating pairs",
		"PASS  visor / raw tokens/s per pair: median 0.992 of 220 pairs",
		"geometric mean 0.996, 95% interval 0.982–1.010",
		"client rate / server rate: visor 1.000, raw 1.000",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("no %q in:\n%s", w, got)
		}
	}
	if _, err := pooled(nil); err == nil {
		t.Error("pooling no files succeeded")
	}
	if _, err := pooled([]string{"testdata/none.json"}); err == nil {
		t.Error("pooling a missing file succeeded")
	}
}
