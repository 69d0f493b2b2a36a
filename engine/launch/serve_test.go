package launch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/conductor"
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
