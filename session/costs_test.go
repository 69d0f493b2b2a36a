package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// costProjector encodes an image in about 150 ms on one CPU thread: several times the text a request evaluates
// beside it (the tool turn's second request: about 50 ms), fast enough for CI. An encode is the request's time
// less its text at the rate of the request before, so on a loaded machine, where one request runs several times
// slower than the next, an encode smaller than its text (4 blocks: 32 ms against 47) was lost in the noise and
// the sample with it. 112/14 = 8, so 64 tokens per image.
var costProjector = testmodel.ProjectorOptions{ImageSize: 112, PatchSize: 14, EmbeddingLength: 128, Blocks: 16, Heads: 4}

// TestMeasuredCostsAreStoredAndPlannedWith runs turns on the real llama-server with a text question, an image
// sent with the question and an image attached ahead (prefilled): the engine's cost model in the store then holds
// prompt and encode numbers within a sane factor of what the server's timings say, on the CPU side of the split
// (the engine has no GPU) and never on the GPU's; a new service over the same file (a restart) plans with them:
// the scheduler's reason for prefilling names the measured encode time, not the seed's.
func TestMeasuredCostsAreStoredAndPlannedWith(t *testing.T) {
	dir := t.TempDir()
	chat, proj := filepath.Join(dir, "chat.gguf"), filepath.Join(dir, "proj.gguf")
	if err := testmodel.WriteChatFile(chat); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteProjectorFile(proj, costProjector); err != nil {
		t.Fatal(err)
	}
	imageTokens, err := costProjector.ImageTokens()
	if err != nil {
		t.Fatal(err)
	}
	srv := enginetest.Start(t, llamacpp.Config{Model: chat, MMProj: proj, Ctx: 4096, Parallel: 1})
	st := openStore(t)
	key := swap.Key{Model: "chat.gguf", Projector: "proj.gguf", Flags: "-t 1"}
	defaults := swap.SeedCosts()
	defaults.Profiles = []swap.Profile{swap.VisionCPU}
	tune := func(c *session.Config) {
		c.Vision = session.VisionYes
		c.Scheduler = &swap.Scheduler{Costs: swap.SeedCosts()}
		c.Costs = session.StoredCosts{Rows: st}
		c.EngineCosts = func(conductor.Ready) (session.EngineCosts, bool) {
			return session.EngineCosts{Key: key, EncodesOnCPU: true, Defaults: defaults}, true
		}
		c.ImageTokens = func(int, int) int { return imageTokens }
	}
	svc := testkit.Service(t, srv, st, tune)
	ctx := context.Background()
	sess, err := svc.Open(ctx, session.OpenOptions{Title: "costs"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	var text []engine.Timings
	var images []engine.ImageSample
	long := "please answer this question about the weather " + strings.Repeat("and the sea ", 8)
	res, err := sess.Turn(ctx, long, nil, nil)
	if err != nil || res.Final.Timings == nil {
		t.Fatalf("text turn: %v", err)
	}
	text = append(text, *res.Final.Timings)
	for i := range 2 {
		res, err = sess.Turn(ctx, "and this?", []tools.Image{{MIME: "image/png", Data: testkit.PNG(t, 40+i, 40)}}, nil)
		if err != nil || res.Final.Timings == nil {
			t.Fatalf("image turn %d: %v", i, err)
		}
		images = append(images, engine.ImageSample{Timings: *res.Final.Timings, ImageTokens: imageTokens})
	}
	if _, err := sess.Attach(ctx, testkit.PNG(t, 50, 40)); err != nil {
		t.Fatal(err)
	}
	if _, err = sess.Turn(ctx, "and the attached one?", nil, nil); err != nil {
		t.Fatal(err)
	}
	evs, err := st.EngineEvents(ctx, sess.ID(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind != memory.EnginePrefill {
			continue
		}
		var d struct {
			PromptN  int     `json:"prompt_n"`
			PromptMS float64 `json:"prompt_ms"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		images = append(images, engine.ImageSample{Timings: engine.Timings{PromptN: d.PromptN, PromptMS: d.PromptMS}, ImageTokens: imageTokens})
	}
	if len(images) != 3 {
		t.Fatalf("want 2 image turns and 1 prefill, got %d image samples (events %+v)", len(images), evs)
	}
	want := engine.MeasureCosts(text, images)

	stored, ok, err := session.StoredCosts{Rows: st}.LoadCosts(ctx, key)
	if err != nil || !ok {
		t.Fatalf("no cost model stored for %s: %v", key.String(), err)
	}
	within := func(name string, got, want float64) {
		t.Helper()
		if want <= 0 || got < want/3 || got > want*3 {
			t.Errorf("%s = %.4g, timings say %.4g: want within a factor of 3", name, got, want)
		}
	}
	t.Logf("stored: prompt %.0f tokens/s, CPU encode %s per image token, samples %v; timings: %.0f tokens/s, %s per image token",
		stored.PrefillTokensPerSecond, stored.EncodeCPU.D(), stored.Samples, want.PromptTokensPerSecond, want.ImagePerToken)
	within("prefill tokens/s", stored.PrefillTokensPerSecond, want.PromptTokensPerSecond)
	within("CPU encode ms per image token", float64(stored.EncodeCPU)/1e6, float64(want.ImagePerToken)/1e6)
	if stored.Samples["encode_cpu_per_token"] != 3 || stored.Samples["encode_gpu_per_token"] != 0 {
		t.Errorf("encode samples %v: want 3 on the CPU (two turns, one prefill) and none on the GPU", stored.Samples)
	}
	if stored.Key != key {
		t.Errorf("stored under key %+v, want %+v", stored.Key, key)
	}
	if stored.EncodeGPU != defaults.EncodeGPU {
		t.Errorf("GPU encode moved to %s on a CPU engine", stored.EncodeGPU.D())
	}
	if n := stored.Samples["tokens_per_second."+string(swap.VisionCPU)]; n < 4 {
		t.Errorf("generation samples %d, want one per step (4)", n)
	}
	if stored.Samples["prefill_tokens_per_second"] < 1 {
		t.Errorf("no prompt samples: %v", stored.Samples)
	}

	// A restart: a new service over the same file plans with the stored numbers.
	svc2 := testkit.Service(t, srv, st, tune)
	if err := svc2.EnsureReady(ctx); err != nil {
		t.Fatal(err)
	}
	got, known := svc2.Costs()
	if !known || got.EncodeCPU != stored.EncodeCPU || got.PrefillTokensPerSecond != stored.PrefillTokensPerSecond {
		t.Fatalf("after a restart the engine's costs are %+v (known %v), want the stored %+v", got, known, stored)
	}
	sess2, err := svc2.Open(ctx, session.OpenOptions{Title: "after restart"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.Close()
	if _, err := sess2.Attach(ctx, testkit.PNG(t, 60, 40)); err != nil {
		t.Fatal(err)
	}
	if _, err := sess2.Turn(ctx, "and now?", nil, nil); err != nil {
		t.Fatal(err)
	}
	evs, err = st.EngineEvents(ctx, sess2.ID(), 100)
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler's words for the encode it expects: the measured per-token time, in the restarted engine's
	// profile (the CPU one, the only one its cost model offers).
	est := fmt.Sprintf("encode now (%s", time.Duration(imageTokens*int64OfDuration(got.EncodeCPU)).Round(time.Millisecond))
	seen := false
	for _, e := range evs {
		seen = seen || e.Kind == memory.EngineDecision && strings.Contains(string(e.Detail), est)
	}
	if !seen {
		t.Fatalf("no decision priced with the measured encode (%q): %+v", est, evs)
	}

	// A lone tool returns a screenshot: nothing runs beside it to hide a prefill behind, so the next request
	// encodes the image itself, on the critical path; it is measured as an encode, and explained as one.
	reg := tools.NewRegistry()
	if err := reg.Register(tools.New("screenshot", "Take a screenshot", func(context.Context, struct{}) (tools.Result, error) {
		return tools.Result{Text: "taken", Images: []tools.Image{{MIME: "image/png", Data: testkit.PNG(t, 70, 40)}}}, nil
	}, tools.ReturnsImages())); err != nil {
		t.Fatal(err)
	}
	svc3 := testkit.Service(t, srv, st, func(c *session.Config) {
		tune(c)
		c.Agent.Tools = reg
	})
	sess3, err := svc3.Open(ctx, session.OpenOptions{Title: "tool image"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess3.Close()
	var explained []string
	res, err = sess3.Turn(ctx, "look at the screen", nil, func(ev agent.Event) {
		if e, ok := ev.(agent.Explain); ok {
			explained = append(explained, e.Text)
		}
	})
	if err != nil || res.Steps != 2 {
		t.Fatalf("tool turn: %d steps, %v", res.Steps, err)
	}
	want2 := fmt.Sprintf("step 2: the request encoded its 1 new image(s) (%d tokens) itself, on the critical path", imageTokens)
	if len(explained) != 1 || !strings.HasPrefix(explained[0], want2) {
		t.Fatalf("explained %q, want one line starting %q", explained, want2)
	}
	after, _ := svc3.Costs()
	if n := after.Samples["encode_cpu_per_token"]; n != stored.Samples["encode_cpu_per_token"]+2 {
		t.Errorf("encode samples %d after the restarted session's prefill and the tool turn, want %d", n, stored.Samples["encode_cpu_per_token"]+2)
	}
}

func int64OfDuration(d swap.Duration) int { return int(d) }

// genEngine is always ready at the generation it is set to: a relaunch shows as a new generation.
type genEngine struct{ gen int }

func (e *genEngine) ready() conductor.Ready {
	return conductor.Ready{Client: engine.NewClient("http://127.0.0.1:9", ""), Generation: e.gen}
}
func (e *genEngine) EnsureReady(context.Context) (conductor.Ready, error) { return e.ready(), nil }
func (e *genEngine) Recover(context.Context) (conductor.Ready, error)     { return e.ready(), nil }

// TestRelaunchTimeIsMeasured reports a relaunch as the conductor does (relaunching, then ready after 3 s): the
// engine it started has a relaunch sample of 3 s, kept in the store; a plain start is not one. The first
// launch's GPU warm-up image (2 s for 1,000 tokens at the seed's 1.5 ms per token) measures a 0.5 s compile.
func TestRelaunchTimeIsMeasured(t *testing.T) {
	st := openStore(t)
	eng := &genEngine{gen: 1}
	key := swap.Key{Model: "m.gguf"}
	svc, err := session.New(session.Config{Engine: eng, Costs: session.StoredCosts{Rows: st},
		EngineCosts: func(r conductor.Ready) (session.EngineCosts, bool) {
			info := session.EngineCosts{Key: key, Defaults: swap.SeedCosts()}
			if r.Generation == 1 {
				info.FirstImage, info.FirstImageTokens = 2*time.Second, 1000
			}
			return info, true
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc.RecordEngineEvent(conductor.Event{Kind: conductor.EventReady, Duration: 7 * time.Second})
	if err := svc.EnsureReady(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _ := svc.Costs(); c.Samples["relaunch"] != 0 {
		t.Fatalf("a first start counted as a relaunch: %v", c.Samples)
	} else if c.PipelineCompile.D() != 500*time.Millisecond || c.Samples["pipeline_compile"] != 1 {
		t.Fatalf("pipeline compile %s from %d samples, want 500ms from 1", c.PipelineCompile.D(), c.Samples["pipeline_compile"])
	}
	svc.RecordEngineEvent(conductor.Event{Kind: conductor.EventRelaunching})
	svc.RecordEngineEvent(conductor.Event{Kind: conductor.EventReady, Duration: 3 * time.Second})
	eng.gen = 2
	if err := svc.EnsureReady(ctx); err != nil {
		t.Fatal(err)
	}
	c, _ := svc.Costs()
	if c.Relaunch.D() != 3*time.Second || c.Samples["relaunch"] != 1 {
		t.Fatalf("relaunch %s from %d samples, want 3s from 1", c.Relaunch.D(), c.Samples["relaunch"])
	}
	stored, ok, err := session.StoredCosts{Rows: st}.LoadCosts(ctx, key)
	if err != nil || !ok || stored.Relaunch.D() != 3*time.Second {
		t.Fatalf("stored %+v %v %v", stored.Relaunch, ok, err)
	}
}

// TestToolImagePrefillIsMeasuredAndExplained: a step calls a slow tool and a screenshot tool in parallel (the
// first turn's two calls are scripted by testkit.TwoCallProxy; the tiny model makes one call per turn). The
// screenshot returns first; the session prefills it while the slow tool runs (the slow tool returns once that
// prefill is in the store), measures that encode, and the next request finds the image in the cache.
func TestToolImagePrefillIsMeasuredAndExplained(t *testing.T) {
	srv := enginetest.Tiny(t, true, llamacpp.Config{})
	hs := testkit.NewTwoCallProxy(t, srv.URL(), "screenshot", "slow_scan")
	st := openStore(t)
	ctx := context.Background()
	var id string
	var mu sync.Mutex
	reg := tools.NewRegistry()
	for _, tl := range []tools.Tool{
		tools.New("screenshot", "Take a screenshot", func(context.Context, struct{}) (tools.Result, error) {
			return tools.Result{Text: "taken", Images: []tools.Image{{MIME: "image/png", Data: testkit.PNG(t, 16, 16)}}}, nil
		}, tools.ReturnsImages(), tools.Parallel()),
		tools.New("slow_scan", "Scan slowly", func(ctx context.Context, _ struct{}) (string, error) {
			mu.Lock()
			sid := id
			mu.Unlock()
			for ctx.Err() == nil {
				evs, err := st.EngineEvents(ctx, sid, 100)
				if err != nil {
					return "", err
				}
				for _, e := range evs {
					if e.Kind == memory.EnginePrefill {
						return "scan complete", nil
					}
				}
				time.Sleep(5 * time.Millisecond) // polls for the prefill; the test does not depend on its speed
			}
			return "", ctx.Err()
		}, tools.Parallel()),
	} {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	key := swap.Key{Model: "tiny"}
	tiny, err := testmodel.ProjectorOptions{}.ImageTokens()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := session.New(session.Config{
		Engine: testkit.FixedEngine{R: conductor.Ready{Client: engine.NewClient(hs.URL, ""), URL: hs.URL, Generation: 1}},
		Store:  st, Vision: session.VisionYes, Agent: session.AgentConfig{Tools: reg, MaxSteps: 4},
		Costs: session.StoredCosts{Rows: st}, ImageTokens: func(int, int) int { return tiny },
		EngineCosts: func(conductor.Ready) (session.EngineCosts, bool) {
			return session.EngineCosts{Key: key, EncodesOnCPU: true, Defaults: swap.SeedCosts()}, true
		}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := svc.Open(ctx, session.OpenOptions{Title: "tools"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	mu.Lock()
	id = sess.ID()
	mu.Unlock()
	var explained []string
	res, err := sess.Turn(ctx, "go", nil, func(ev agent.Event) {
		if e, ok := ev.(agent.Explain); ok {
			explained = append(explained, e.Text)
		}
	})
	if err != nil || res.Steps != 2 {
		t.Fatalf("%d steps, %v", res.Steps, err)
	}
	if len(explained) != 2 || !strings.HasPrefix(explained[0], "step 1: prefilled 1 tool image(s) (16 tokens) while slower tools of the step ran — done in ") ||
		!strings.HasPrefix(explained[1], "step 2: the request found its 1 image(s) in the cache") {
		t.Fatalf("explained %q", explained)
	}
	c, _ := svc.Costs()
	if c.Samples["encode_cpu_per_token"] != 1 || c.Samples["encode_gpu_per_token"] != 0 {
		t.Fatalf("samples %v: want the tool prefill's encode, on the CPU", c.Samples)
	}
}

// TestResumedHistoryPrefillIsMeasuredAndExplained resumes a stored session whose history holds an image: the
// prefill chain that evaluates the history in the background is measured into the engine's cost model (an
// encode sample on the CPU, kept in the store) and the first turn explains it as the history's prefill, hidden
// since the turn was sent after it ended; the turn's own request, which finds the image in the cache, adds no
// encode sample.
func TestResumedHistoryPrefillIsMeasuredAndExplained(t *testing.T) {
	srv := enginetest.Tiny(t, true, llamacpp.Config{Parallel: 1})
	st := openStore(t)
	ctx := context.Background()
	key := swap.Key{Model: "tiny"}
	tiny, err := testmodel.ProjectorOptions{}.ImageTokens()
	if err != nil {
		t.Fatal(err)
	}
	svc := testkit.Service(t, srv, st, func(c *session.Config) {
		c.Vision = session.VisionYes
		c.Scheduler = &swap.Scheduler{Costs: swap.SeedCosts()}
		c.Costs = session.StoredCosts{Rows: st}
		c.ImageTokens = func(int, int) int { return tiny }
		c.EngineCosts = func(conductor.Ready) (session.EngineCosts, bool) {
			return session.EngineCosts{Key: key, EncodesOnCPU: true, Defaults: swap.SeedCosts()}, true
		}
	})
	sess, err := svc.Open(ctx, session.OpenOptions{Resume: storedWithImage(t, st, 3)})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.WaitAhead(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _ := svc.Costs(); c.Samples["encode_cpu_per_token"] != 1 || c.Samples["encode_gpu_per_token"] != 0 {
		t.Fatalf("samples %v after the history's prefill: want its encode, on the CPU", c.Samples)
	}
	if stored, ok, err := (session.StoredCosts{Rows: st}).LoadCosts(ctx, key); err != nil || !ok || stored.Samples["encode_cpu_per_token"] != 1 {
		t.Fatalf("stored costs %v (found %v, %v): want the history prefill's encode kept", stored.Samples, ok, err)
	}
	var explained []string
	if _, err := sess.Turn(ctx, "and now?", nil, func(ev agent.Event) {
		if e, ok := ev.(agent.Explain); ok {
			explained = append(explained, e.Text)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(explained) != 1 || !strings.HasPrefix(explained[0], "prefill the history's 1 image(s) ahead (known ") ||
		!strings.Contains(explained[0], " — done in ") || !strings.HasSuffix(explained[0], ", hidden") {
		t.Fatalf("explained %q, want one line for the history's prefill, done and hidden", explained)
	}
	if c, _ := svc.Costs(); c.Samples["encode_cpu_per_token"] != 1 {
		t.Errorf("samples %v after the turn: its request found the image in the cache, want no new encode sample", c.Samples)
	}
}
