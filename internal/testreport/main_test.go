package main

import (
	"strings"
	"testing"
	"time"
)

// The events are what `go test -json` writes for a package with a passing, a skipped and a failing test, and for
// a package whose build failed.
func TestReportSaysEveryOutcome(t *testing.T) {
	t0 := time.Unix(0, 0)
	evs := []event{
		{Action: "start", Package: "m/visor/a"},
		{Action: "run", Package: "m/visor/a", Test: "TestOK"},
		{Action: "pass", Package: "m/visor/a", Test: "TestOK"},
		{Action: "run", Package: "m/visor/a", Test: "TestSkip"},
		{Action: "output", Package: "m/visor/a", Test: "TestSkip", Output: "    x_test.go:12: no tmux (apt-get install tmux)\n"},
		{Action: "output", Package: "m/visor/a", Test: "TestSkip", Output: "--- SKIP: TestSkip (0.00s)\n"},
		{Action: "skip", Package: "m/visor/a", Test: "TestSkip"},
		{Action: "run", Package: "m/visor/a", Test: "TestBad"},
		{Action: "output", Package: "m/visor/a", Test: "TestBad", Output: "    x_test.go:20: want 2, got 3\n"},
		{Action: "fail", Package: "m/visor/a", Test: "TestBad", Elapsed: 0.5},
		{Action: "fail", Package: "m/visor/a", Elapsed: 1},
		{Action: "build-output", ImportPath: "m/visor/b [m/visor/b.test]", Output: "b.go:3: undefined: x\n"},
		{Action: "fail", Package: "m/visor/b", FailedBuild: "m/visor/b [m/visor/b.test]"},
	}
	r := newReport(t0)
	var live strings.Builder
	for _, ev := range evs {
		live.WriteString(r.add(ev))
	}
	for _, want := range []string{"FAIL a TestBad", "want 2, got 3", "FAIL b: build failed", "undefined: x"} {
		if !strings.Contains(live.String(), want) {
			t.Errorf("live output lacks %q:\n%s", want, live.String())
		}
	}
	sum := r.summary(t0.Add(90 * time.Second))
	for _, want := range []string{"a TestSkip: no tmux (apt-get install tmux)", "packages that failed: a b", "tests: 1 passed, 2 failed, 1 skipped\n"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if !r.failed() {
		t.Error("a run with failures reads as passed")
	}
}

func TestHeartbeatNamesTheLongestRunningTest(t *testing.T) {
	t0 := time.Unix(0, 0)
	r := newReport(t0)
	if got := r.heartbeatLine(t0.Add(25 * time.Second)); !strings.Contains(got, "building test binaries") {
		t.Errorf("before any test: %q", got)
	}
	r.add(event{Action: "start", Package: "m/visor/a", Time: t0})
	r.add(event{Action: "run", Package: "m/visor/a", Test: "TestSlow", Time: t0.Add(time.Second)})
	r.add(event{Action: "run", Package: "m/visor/a", Test: "TestQuick", Time: t0.Add(50 * time.Second)})
	got := r.heartbeatLine(t0.Add(61 * time.Second))
	if !strings.Contains(got, "a TestSlow (1m00s), a TestQuick (11s)") {
		t.Errorf("heartbeat %q should name TestSlow first", got)
	}
}
