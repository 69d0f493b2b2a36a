package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/tools"
)

// BenchmarkLookahead measures what prefilling an image ahead saves on a hybrid (qwen35) model with a projector
// whose encode takes seconds on a CPU (testmodel.SlowProjector, 1,024 image tokens), each arm against the same
// turn without lookahead in the same run, on the same real llama-server:
//
//   - attached: the image is attached (and prefilled) before the question; the time to first token of the
//     question's turn, prefilled vs not. ttft-ratio is prefilled / not.
//   - tool: a step runs a slow tool and a screenshot tool in parallel; the screenshot returns first and is
//     prefilled while the slow tool runs. The exposed latency is from the slow tool's return to the first token
//     of the next turn (so a prefill still running then counts against it). The slow tool takes twice what an
//     image cost in a warm-up run. exposed-ratio is with lookahead / without.
//
// Every iteration uses new images, so nothing is cached from an earlier one. Run it with
//
//	go test ./agent -run '^$' -bench Lookahead -benchtime 2x
func BenchmarkLookahead(b *testing.B) {
	srv := enginetest.TinyHybrid(b, true, testmodel.SlowProjector, llamacpp.Config{Parallel: 1})
	ctx := context.Background()
	imageTokens, err := testmodel.SlowProjector.ImageTokens()
	if err != nil {
		b.Fatal(err)
	}
	seed := uint8(100)
	nextImage := func() []tools.Image {
		seed++
		return []tools.Image{{MIME: "image/png", Data: testPNG(b, seed)}}
	}
	var text []engine.Timings
	var images []engine.ImageSample

	b.Run("attached", func(b *testing.B) {
		a, err := agent.New(agent.Config{Model: srv.Client(), MaxSteps: 2})
		if err != nil {
			b.Fatal(err)
		}
		first := agent.Message{Role: "user", Content: "hello"}
		f := a.Run(ctx, nil, first, nil)
		if f.Err != nil {
			b.Fatal(f.Err)
		}
		history := []agent.Message{first, f.Final}
		ask := func(im []tools.Image) agent.Message {
			f := a.Run(ctx, history, agent.Message{Role: "user", Content: "What is on screen?", Images: im}, nil)
			if f.Err != nil || f.Final.TTFT == 0 || f.Final.Timings == nil {
				b.Fatalf("run: %+v", f)
			}
			return f.Final
		}
		ask(nextImage()) // the first image after start allocates the encoder's buffers: keep it out
		var ahead, base, prefill time.Duration
		b.ResetTimer()
		for range b.N {
			im := nextImage()
			t0 := time.Now()
			pre, err := a.Prefill(ctx, history, agent.Message{Role: "user", Images: im})
			if err != nil || pre == nil {
				b.Fatalf("prefill: %+v %v", pre, err)
			}
			prefill += time.Since(t0)
			images = append(images, engine.ImageSample{Timings: *pre, ImageTokens: imageTokens})
			m := ask(im)
			ahead += m.TTFT
			text = append(text, *m.Timings)
			m = ask(nextImage())
			base += m.TTFT
			images = append(images, engine.ImageSample{Timings: *m.Timings, ImageTokens: imageTokens})
		}
		b.StopTimer()
		n := float64(b.N)
		b.ReportMetric(ahead.Seconds()*1000/n, "ttft-ahead-ms")
		b.ReportMetric(base.Seconds()*1000/n, "ttft-without-ms")
		b.ReportMetric(prefill.Seconds()*1000/n, "prefill-ms")
		b.ReportMetric(float64(ahead)/float64(base), "ttft-ratio")
	})

	b.Run("tool", func(b *testing.B) {
		shot := func() []byte { return nextImage()[0].Data }
		// exposed runs one turn and returns the time from the slow tool's result to the next turn's first token.
		exposed := func(s *toolStep) time.Duration {
			var done, first time.Time
			f := s.run(b, ctx, func(ev agent.Event) {
				switch ev := ev.(type) {
				case agent.ToolCallFinished:
					if ev.Call.Name == "slow_scan" {
						done = time.Now()
					}
				case agent.Token:
					if ev.Step == 2 && first.IsZero() {
						first = time.Now()
					}
				}
			})
			if done.IsZero() || first.IsZero() {
				b.Fatal("no slow tool result or no answer")
			}
			b.Logf("lookahead %v: exposed %v, next request prompt_n %d cache_n %d (%.0f ms)", s.prefills != nil,
				first.Sub(done), f.Final.Timings.PromptN, f.Final.Timings.CacheN, f.Final.Timings.PromptMS)
			return first.Sub(done)
		}
		// Warm-up, without lookahead and with a short slow tool: what an image costs this machine now.
		cost := exposed(newToolStep(b, srv, shot, false, time.Millisecond))
		slow := max(2*cost, time.Second)
		withLookahead := newToolStep(b, srv, shot, true, slow)
		without := newToolStep(b, srv, shot, false, slow)
		var ahead, base time.Duration
		b.ResetTimer()
		for range b.N {
			ahead += exposed(withLookahead)
			base += exposed(without)
		}
		b.StopTimer()
		n := float64(b.N)
		b.ReportMetric(slow.Seconds()*1000, "slow-tool-ms")
		b.ReportMetric(ahead.Seconds()*1000/n, "exposed-ahead-ms")
		b.ReportMetric(base.Seconds()*1000/n, "exposed-without-ms")
		b.ReportMetric(float64(ahead)/float64(base), "exposed-ratio")
	})

	c := engine.MeasureCosts(text, images)
	b.Logf("costs measured from the timings: %.0f prompt tokens/s (%d samples), %.3f ms per image token (%d samples)",
		c.PromptTokensPerSecond, c.TextSamples, float64(c.ImagePerToken)/float64(time.Millisecond), c.ImageSamples)
}
