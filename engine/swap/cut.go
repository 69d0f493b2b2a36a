package swap

import (
	"fmt"
	"time"
)

// CutNeeds describes the request after the next images arrive, for PlanCut.
type CutNeeds struct {
	Window Window
	// Images are the images of the conversation now; Expected how many the next request is expected to add (a
	// screenshot tool's result, an attachment) and Sure how likely it is to add them (0–1).
	Images, Expected int
	Sure             float64
	// Lead is how long before the next request its new images will be known and prefilled: the time the user
	// types after attaching, or 0 for a tool's result, which the loop sends at once.
	Lead    time.Duration
	Profile Profile
	// ImageTokens and StepTokens are a typical image's tokens and one step's text (0: as ChooseWindow takes them).
	ImageTokens, StepTokens int
}

// CutPlan is PlanCut's answer.
type CutPlan struct {
	// Cut says the next request leaves more images out than the last one did: the server evaluates its prompt
	// again from the first new stub on. Dropped is how many images it leaves out, Reeval what that costs.
	Cut     bool
	Dropped int
	Reeval  time.Duration
	// Expected echoes the images the plan counts on.
	Expected int
	// Ahead says to evaluate the shortened prefix now (rendered as the next request will render it), while the
	// user types or the tools run, so the next request only extends it.
	Ahead  bool
	Reason string
}

// PlanCut decides whether the re-evaluation a window cut causes is done ahead of the request that cuts. The cut
// is known before the images that cause it arrive: the window depends on nothing but the number of images. Done
// ahead, it costs nothing on the critical path when the images come; when the images do not come, the request
// renders the longer prompt and evaluates it again from the first stub on — as much as the cut would have
// cost. So it is worth it when the images are more likely than not (Sure > 1/2) and the later prefill of those
// images could not hide it (Lead shorter than the re-evaluation); with a long lead the attachment's own prefill
// renders the shortened prompt and evaluates the cut with it, with no guess.
func PlanCut(c Costs, n CutNeeds) CutPlan {
	w := n.Window
	now, next := w.Dropped(n.Images), w.Dropped(n.Images+n.Expected)
	p := CutPlan{Dropped: next, Expected: n.Expected}
	if n.Expected <= 0 || next <= now {
		p.Reason = "the next request leaves out no more images than the last"
		return p
	}
	p.Cut = true
	tokens, text := typicalStep(c, n.ImageTokens, n.StepTokens)
	// From the first new stub on: the stubs' steps, then the images still sent and their steps.
	kept := n.Images - next
	p.Reeval = c.Encode(n.Profile, kept*tokens) + c.Prefill((next-now+kept)*text) + time.Duration(kept)*c.CachedImage.D()
	switch {
	case n.Sure <= 0.5:
		p.Reason = fmt.Sprintf("the next request would cut %d images, but it carries new images only %.0f%% of the time: "+
			"a wrong guess costs as much as the cut", next-now, 100*n.Sure)
	case n.Lead > 0 && n.Lead >= p.Reeval:
		p.Reason = fmt.Sprintf("the next request cuts %d images (%s to re-evaluate); the prefill of its new images renders "+
			"the shortened prompt within their %s lead", next-now, p.Reeval.Round(time.Millisecond), n.Lead.Round(time.Millisecond))
	default:
		p.Ahead = true
		p.Reason = fmt.Sprintf("the next request cuts %d images: their re-evaluation (%s) is done now, before its images arrive",
			next-now, p.Reeval.Round(time.Millisecond))
	}
	return p
}
