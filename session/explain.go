package session

import (
	"fmt"
	"strings"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

// aheadNote is one scheduler action taken for a session's next message and the prefills it led to: what
// --explain says about it when the message is sent.
type aheadNote struct {
	action  swap.Action
	carried string
	at      time.Time
	// history: the action is for the history's images (a resumed session, a relaunched engine), known since at,
	// not for attachments.
	history bool
	runs    []prefillRun // guarded by the session's mu
}

// prefillRun is one ahead-of-time evaluation and what it took.
type prefillRun struct {
	images int
	start  time.Time
	took   time.Duration
	err    error
}

// explain is the note as one line: the action, why, and what it measured against the send at sent, after which
// the turn waited waited for prefills still running.
func (n *aheadNote) explain(sent time.Time, waited time.Duration) string {
	a := n.action
	switch a.Kind {
	case swap.ActPrefill:
		images := len(a.Images)
		for _, r := range n.runs {
			images = max(images, r.images)
		}
		line := fmt.Sprintf("prefill %d image(s) ahead (attached %s before send; %s)", images,
			sent.Sub(n.at).Round(100*time.Millisecond), a.Reason)
		if n.history {
			line = fmt.Sprintf("prefill the history's %d image(s) ahead (known %s before send; %s)", images,
				sent.Sub(n.at).Round(100*time.Millisecond), a.Reason)
		}
		if len(n.runs) == 0 {
			return line + " — not run"
		}
		var took time.Duration
		var end time.Time
		for _, r := range n.runs {
			if r.err != nil {
				return line + fmt.Sprintf(" — failed (%v): the question's request encodes them", r.err)
			}
			took += r.took
			end = r.start.Add(r.took)
		}
		if len(n.runs) > 1 {
			line += fmt.Sprintf(" — done in %d runs, %s", len(n.runs), took.Round(time.Millisecond))
		} else {
			line += fmt.Sprintf(" — done in %s", took.Round(time.Millisecond))
		}
		if exposed := end.Sub(sent); exposed > 0 && waited > 0 {
			return line + fmt.Sprintf(", %s of it exposed (the message waited for it)", min(exposed, waited).Round(time.Millisecond))
		}
		return line + ", hidden"
	case swap.ActRelaunch:
		if n.carried == "started" {
			return fmt.Sprintf("relaunch into %s (%s) — started in the background; the next request evaluates the "+
				"conversation again", a.Profile, a.Reason)
		}
		return fmt.Sprintf("relaunch into %s (%s) — not carried out: %s", a.Profile, a.Reason, strings.TrimPrefix(n.carried, "no: "))
	}
	return fmt.Sprintf("%s (%s) — not carried out: %s", a.Kind, a.Reason, strings.TrimPrefix(n.carried, "no: "))
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
