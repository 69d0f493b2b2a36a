package launch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
)

// TestCrashReporterTellsARestart: the first start's ready is silent; a crash, its restart and the ready that
// ends it are told, with the restart's duration.
func TestCrashReporterTellsARestart(t *testing.T) {
	var b strings.Builder
	r := CrashReporter(&b)
	for _, ev := range []conductor.Event{
		{Kind: conductor.EventReady, Duration: time.Second},
		{Kind: conductor.EventCrashed, Err: errors.New("signal: killed")},
		{Kind: conductor.EventRestarting},
		{Kind: conductor.EventReady, Duration: 1500 * time.Millisecond},
		{Kind: conductor.EventReady, Duration: time.Second},
	} {
		r(ev)
	}
	want := "the engine crashed: signal: killed\nrestarting it …\nengine restarted in 1.5s\n"
	if b.String() != want {
		t.Errorf("reported %q, want %q", b.String(), want)
	}
}

// TestServeTellsTheWarmup: after a GPU start visor serve's address line says the background warm-up runs (a
// request sent then waits for it: 80 s for a first screenshot on the H200), and its end is told with its
// duration; a start that needs none says nothing of it.
func TestServeTellsTheWarmup(t *testing.T) {
	props := llamacpp.Props{NCtx: 262144, Vision: true}
	if got, want := servingLine("m.gguf", "http://127.0.0.1:8080", props, true),
		"serving m.gguf at http://127.0.0.1:8080 (n_ctx 262144, vision true, warming up the GPU: requests wait for it); "+
			"visor commands with the same --model reuse it; Ctrl-C stops it"; got != want {
		t.Errorf("warming:\n got %q\nwant %q", got, want)
	}
	if got := servingLine("m.gguf", "http://127.0.0.1:8080", props, false); strings.Contains(got, "warm") ||
		!strings.HasPrefix(got, "serving m.gguf at http://127.0.0.1:8080 (n_ctx 262144, vision true); ") {
		t.Errorf("no warm-up: %q", got)
	}
	var b strings.Builder
	r := serveReporter(&b)
	for _, ev := range []conductor.Event{
		{Kind: conductor.EventReady, Duration: time.Second},
		{Kind: conductor.EventWarmedUp, Duration: 64319 * time.Millisecond},
		{Kind: conductor.EventCrashed, Err: errors.New("signal: killed")},
	} {
		r(ev)
	}
	want := "engine warmed up in 1m4.3s: requests no longer wait for the GPU's one-time compiles\n" +
		"the engine crashed: signal: killed\nrestarting it …\n"
	if b.String() != want {
		t.Errorf("reported %q, want %q", b.String(), want)
	}
}
