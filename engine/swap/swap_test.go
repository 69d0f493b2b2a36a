package swap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

var upstream = []swap.Profile{swap.MTPSwap, swap.VisionCPU, swap.VisionNoMTP, swap.TextOnly}

func TestDecide(t *testing.T) {
	cases := []struct {
		name       string
		current    swap.Profile
		outlook    swap.Outlook
		want       swap.Profile
		wantSwitch bool
		prefill    bool
	}{
		// 20K generated tokens and one large screenshot: MTP's speed dominates; one swap (0.75 s) is cheap.
		{"text heavy stays on MTP", swap.MTPSwap, swap.Outlook{ImageRuns: 1, ImageTokens: 1000, GenTokens: 20000},
			swap.MTPSwap, false, false},
		// 20 screenshots with short answers: no-MTP would be 8 s faster, but a restart costs 20 s.
		{"image heavy, saving below restart", swap.MTPSwap, swap.Outlook{ImageRuns: 20, ImageTokens: 20000, GenTokens: 2000},
			swap.MTPSwap, false, false},
		// Three times that: 15 s of swaps plus slower MTP gains no longer pay for themselves; the saving is 25 s.
		{"image heavy, saving above restart", swap.MTPSwap, swap.Outlook{ImageRuns: 60, ImageTokens: 60000, GenTokens: 6000},
			swap.VisionNoMTP, true, false},
		// A text-only engine cannot take the screenshot at all: switch to the fastest profile that can.
		{"text only must switch", swap.TextOnly, swap.Outlook{ImageRuns: 1, ImageTokens: 1000, GenTokens: 500},
			swap.MTPSwap, true, false},
		// Five idle seconds (the user still typing) cover the swap and the encode: prefill, and MTP stays best.
		{"idle time hides the swap", swap.MTPSwap, swap.Outlook{ImageRuns: 1, ImageTokens: 1000, GenTokens: 300,
			Idle: 5 * time.Second}, swap.MTPSwap, false, true},
		// No images coming: nothing to prefill, and text-only is as fast as MTP.
		{"no images", swap.TextOnly, swap.Outlook{GenTokens: 1000, Idle: time.Second}, swap.TextOnly, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := swap.Decide(tc.current, upstream, swap.SeedCosts, tc.outlook)
			if err != nil {
				t.Fatal(err)
			}
			if d.Profile != tc.want || d.Switch != tc.wantSwitch || d.Prefill != tc.prefill {
				t.Fatalf("decision %+v, want %s switch=%v prefill=%v", d, tc.want, tc.wantSwitch, tc.prefill)
			}
			if d.Reason == "" {
				t.Fatal("a decision must say why")
			}
		})
	}
}

func TestCostArithmetic(t *testing.T) {
	o := swap.Outlook{ImageRuns: 2, ImageTokens: 1000, GenTokens: 2500}
	got, ok := swap.Cost(swap.MTPSwap, swap.SeedCosts, o)
	// 2,500 tokens at 250/s = 10 s; 2 swaps × 753 ms; 1,000 tokens × 1.5 ms = 1.5 s.
	want := 10*time.Second + 2*753*time.Millisecond + 1500*time.Millisecond
	if !ok || got != want {
		t.Fatalf("mtp-swap cost %s, want %s", got, want)
	}
	o.Idle = time.Second // hides one second of the 3.006 s of image work
	if got, _ := swap.Cost(swap.MTPSwap, swap.SeedCosts, o); got != want-time.Second {
		t.Fatalf("with idle time: %s, want %s", got, want-time.Second)
	}
	if _, ok := swap.Cost(swap.TextOnly, swap.SeedCosts, o); ok {
		t.Fatal("text-only accepted images")
	}
}

func TestDecideWithoutVision(t *testing.T) {
	_, err := swap.Decide(swap.TextOnly, []swap.Profile{swap.TextOnly}, swap.SeedCosts, swap.Outlook{ImageRuns: 1, ImageTokens: 10})
	if err == nil || !strings.Contains(err.Error(), "--mmproj") {
		t.Fatalf("err %v", err)
	}
}
