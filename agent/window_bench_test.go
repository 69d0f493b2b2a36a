package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/tools"
)

// uiPNG is a screenshot-like image: flat panels with rows of noisy "text", so it compresses as a real
// screen does (a 1280×800 one is about half a megabyte) and the server's decode costs what a real one does.
func uiPNG(tb testing.TB, seed uint64, w, h int) []byte {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x5c4ee7))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	bg := color.RGBA{R: uint8(200 + r.IntN(55)), G: uint8(200 + r.IntN(55)), B: uint8(200 + r.IntN(55)), A: 255}
	for y := range h {
		for x := range w {
			c := bg
			if x > w/4 && (y/16)%2 == 0 && (x/7)%9 != 0 {
				v := uint8(r.IntN(120))
				c = color.RGBA{R: v, G: v, B: v, A: 255}
			} else if x <= w/4 {
				c = color.RGBA{R: 40, G: uint8(60 + y%40), B: 90, A: 255}
			}
			img.SetRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkImageHistory measures what each image of the history adds to a request's time to first token on a
// real llama-server (the tiny hybrid model with a projector), with every image re-sent (keep-all) and with the
// image window (keep 2, batch 2). llama-server decodes and hashes every image of a request before it can match
// its cache, so without the window a conversation slows down with every screenshot. For n images in the history
// the conversation is evaluated once, then follow-up questions (text only, each extending the cached
// conversation) are timed; the slope is fitted over n. slope-ratio is the window's slope per history image over
// keep-all's, measured in the same run (the acceptance line is ≤ 0.2). Run it with
//
//	go test ./agent -run '^$' -bench ImageHistory -benchtime 1x
func BenchmarkImageHistory(b *testing.B) {
	srv := enginetest.TinyHybrid(b, true, testmodel.ProjectorOptions{}, llamacpp.Config{Parallel: 1, Ctx: 8192})
	ctx := context.Background()
	sizes := []int{2, 5, 8, 11}
	const followUps = 3
	shots := make([]tools.Image, slices.Max(sizes))
	for i := range shots {
		shots[i] = tools.Image{MIME: "image/png", Data: uiPNG(b, uint64(i+1), 960, 600)}
	}
	b.Logf("screenshots of %d KB each", len(shots[0].Data)/1000)
	arms := []struct {
		name string
		w    agent.ImageWindow
	}{{"keep-all", agent.ImageWindow{}}, {"window", agent.ImageWindow{Keep: 2, Batch: 2}}}
	slope := make([]float64, len(arms))
	b.ResetTimer()
	for range b.N {
		for k, arm := range arms {
			a, err := agent.New(agent.Config{Model: srv.Client(), MaxSteps: 1, MaxTokens: 2, ImageWindow: arm.w})
			if err != nil {
				b.Fatal(err)
			}
			var xs, ys []float64
			for _, n := range sizes {
				var history []agent.Message
				for i := range n {
					history = append(history,
						agent.Message{Role: "user", Content: fmt.Sprintf("screen %d: what changed?", i), Images: shots[i : i+1 : i+1]},
						agent.Message{Role: "assistant", Content: fmt.Sprintf("change %d", i)})
				}
				var ttfts []time.Duration
				for q := range followUps + 1 {
					user := agent.Message{Role: "user", Content: fmt.Sprintf("and now, question %d?", q)}
					f := a.Run(ctx, history, user, nil)
					if f.Err != nil || f.Final.TTFT == 0 {
						b.Fatalf("%s, %d images: %+v", arm.name, n, f)
					}
					history = append(history, user, f.Final)
					if q > 0 { // the first evaluates the conversation; the follow-ups find it cached
						ttfts = append(ttfts, f.Final.TTFT)
					}
				}
				slices.Sort(ttfts)
				med := ttfts[len(ttfts)/2]
				b.Logf("%s: %2d images in the history: median TTFT %v", arm.name, n, med.Round(time.Millisecond))
				xs, ys = append(xs, float64(n)), append(ys, med.Seconds()*1000)
			}
			slope[k] = fitSlope(xs, ys)
			b.ReportMetric(slope[k], arm.name+"-ms/image")
		}
	}
	b.StopTimer()
	if slope[0] > 0 {
		b.ReportMetric(math.Abs(slope[1])/slope[0], "slope-ratio")
	}
}

// fitSlope is the least-squares slope of y over x.
func fitSlope(xs, ys []float64) float64 {
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// TestWindowKeepsTheCache runs a screenshot chat on a real llama-server (the tiny hybrid model, whose cache can
// be extended but not cut back) with the image window: a turn whose window did not move reuses the whole previous
// request from the cache, a turn whose cut moved evaluates from the first new stub on, and the requests never
// carry more than keep+batch-1 images while the conversation keeps them all.
func TestWindowKeepsTheCache(t *testing.T) {
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{}, llamacpp.Config{Parallel: 1})
	w := agent.ImageWindow{Keep: 2, Batch: 2}
	a, err := agent.New(agent.Config{Model: srv.Client(), MaxSteps: 1, MaxTokens: 4, ImageWindow: w})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var history []agent.Message
	prev := 0 // the previous request's prompt, cached and evaluated
	cuts := 0
	for turn := 1; turn <= 7; turn++ {
		user := agent.Message{Role: "user", Content: fmt.Sprintf("screen %d?", turn),
			Images: []tools.Image{{MIME: "image/png", Data: testPNG(t, uint8(turn))}}}
		f := a.Run(ctx, history, user, nil)
		if f.Err != nil || f.Final.Timings == nil {
			t.Fatalf("turn %d: %+v", turn, f)
		}
		history = append(history, user, f.Final)
		tm := f.Final.Timings
		moved := w.Dropped(turn) != w.Dropped(turn-1)
		t.Logf("turn %d: dropped %d, prompt_n %d, cache_n %d", turn, w.Dropped(turn), tm.PromptN, tm.CacheN)
		switch {
		case turn > 1 && !moved && tm.CacheN < prev:
			t.Errorf("turn %d: the window did not move, yet only %d of the previous request's %d tokens came from the cache",
				turn, tm.CacheN, prev)
		case moved && tm.CacheN >= prev:
			t.Errorf("turn %d: the cut moved, yet the request reused all %d tokens: the stub did not replace the image", turn, prev)
		}
		if moved {
			cuts++
		}
		prev = tm.PromptN + tm.CacheN
	}
	if cuts != 2 || countImages(history) != 7 {
		t.Errorf("%d cuts, %d images kept in the conversation; want 2 and 7", cuts, countImages(history))
	}
}

func countImages(msgs []agent.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Images)
	}
	return n
}
