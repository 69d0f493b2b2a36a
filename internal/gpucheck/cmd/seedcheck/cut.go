package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/tools"
)

// CutTurn is one turn of the raw window chat (-cut): the attachment's prefill (where a cut's re-evaluation
// happens) and the question's request.
type CutTurn struct {
	Turn       int     `json:"turn"`
	Dropped    int     `json:"dropped"`
	Cut        bool    `json:"cut"`
	PrePromptN int     `json:"prefill_prompt_n"`
	PreCacheN  int     `json:"prefill_cache_n"`
	PreSeconds float64 `json:"prefill_s"`
	PromptN    int     `json:"prompt_n"`
	CacheN     int     `json:"cache_n"`
	TTFT       float64 `json:"ttft_s"`
	Err        string  `json:"error,omitempty"`
}

// CutRun is one --checkpoint-min-step value's chat.
type CutRun struct {
	MinStep int       `json:"checkpoint_min_step"`
	Turns   []CutTurn `json:"turns"`
	// CutTokens and CutSeconds sum the cut turns' prefills; OtherTokens/OtherSeconds the other turns'.
	CutTokens    int     `json:"cut_prompt_n"`
	CutSeconds   float64 `json:"cut_prefill_s"`
	OtherTokens  int     `json:"other_prompt_n"`
	OtherSeconds float64 `json:"other_prefill_s"`
	Err          string  `json:"error,omitempty"`
}

// OlderImages compares what stands in a request for the images older than the newest two.
type OlderImages struct {
	Variant string `json:"variant"` // stub, downscaled WxH, full
	// PromptTokens is the request's prompt; ColdSeconds its time to first token evaluated from an empty cache
	// (what a relaunch, or a cut from the start, costs); CachedSeconds a follow-up's with everything cached.
	PromptTokens  int     `json:"prompt_tokens"`
	ColdSeconds   float64 `json:"cold_ttft_s"`
	CachedSeconds float64 `json:"cached_ttft_s"`
	Err           string  `json:"error,omitempty"`
}

// CutReport is the -cut result.
type CutReport struct {
	Runs  []CutRun      `json:"runs"`
	Older []OlderImages `json:"older_images"`
}

// runCut starts llama-server on the stand-in, resident projector and MTP, at each checkpoint spacing of steps,
// and runs a screenshot chat through visor's agent with the window (keep 2, batch 2), prefilling each attachment
// as the session does; then, on the last server, compares older images stubbed, downscaled and full.
func runCut(ctx context.Context, server, model, mmproj, out string, steps []int, turns int) CutReport {
	var rep CutReport
	for k, step := range steps {
		run := CutRun{MinStep: step}
		url, stop, err := startRaw(ctx, server, model, mmproj, filepath.Join(out, fmt.Sprintf("cut-%d.log", step)), step)
		if err != nil {
			run.Err = err.Error()
			rep.Runs = append(rep.Runs, run)
			continue
		}
		c := engine.NewClient(url, "")
		w := agent.ImageWindow{Keep: 2, Batch: 2}
		a, err := agent.New(agent.Config{Model: c, Tools: tools.NewRegistry(), MaxSteps: 1, MaxTokens: 1, ImageWindow: w})
		if err != nil {
			run.Err = err.Error()
			stop()
			rep.Runs = append(rep.Runs, run)
			continue
		}
		// A warm-up turn: the first image of a process pays its pipelines' load.
		if png, err := screenshot(1920, 1080, 4999); err == nil {
			a.Run(ctx, nil, agent.Message{Role: "user", Content: "warm", Images: []tools.Image{{MIME: "image/png", Data: png}}}, nil)
		}
		var history []agent.Message
		for i := 1; i <= turns; i++ {
			t := CutTurn{Turn: i, Dropped: w.Dropped(i), Cut: w.Dropped(i) > w.Dropped(i-1)}
			png, err := screenshot(1920, 1080, uint64(5000+i))
			if err != nil {
				t.Err = err.Error()
				run.Turns = append(run.Turns, t)
				continue
			}
			im := []tools.Image{{MIME: "image/png", Data: png}}
			t0 := time.Now()
			pre, err := a.Prefill(ctx, history, agent.Message{Role: "user", Images: im})
			t.PreSeconds = time.Since(t0).Seconds()
			if err != nil {
				t.Err = "prefill: " + err.Error()
			} else if pre != nil {
				t.PrePromptN, t.PreCacheN = pre.PromptN, pre.CacheN
			}
			user := agent.Message{Role: "user", Content: fmt.Sprintf("Turn %d: what changed on the screen since the last one?", i), Images: im}
			f := a.Run(ctx, history, user, nil)
			if f.Err != nil {
				t.Err += " turn: " + f.Err.Error()
			}
			if tm := f.Final.Timings; tm != nil {
				t.PromptN, t.CacheN = tm.PromptN, tm.CacheN
			}
			t.TTFT = f.Final.TTFT.Seconds()
			ans := f.Final
			if ans.Content == "" && ans.Reasoning == "" {
				ans = agent.Message{Role: "assistant", Content: "(no answer)"}
			}
			history = append(history, user, ans)
			if t.Cut {
				run.CutTokens += t.PrePromptN
				run.CutSeconds += t.PreSeconds
			} else {
				run.OtherTokens += t.PrePromptN
				run.OtherSeconds += t.PreSeconds
			}
			say("cut -cms %d turn %2d: dropped %d (cut %v): prefill %d tokens (cached %d) in %.3f s; request %d (cached %d) ttft %.3f s %s",
				step, i, t.Dropped, t.Cut, t.PrePromptN, t.PreCacheN, t.PreSeconds, t.PromptN, t.CacheN, t.TTFT, t.Err)
			run.Turns = append(run.Turns, t)
		}
		if k == len(steps)-1 {
			rep.Older = olderImages(ctx, c)
		}
		stop()
		rep.Runs = append(rep.Runs, run)
	}
	return rep
}

// olderImages sends a 10-image history with the newest two as they are and the 8 older ones stubbed, downscaled
// or full, each from an empty cache (a different first message) and then extended by a follow-up.
func olderImages(ctx context.Context, c *engine.Client) []OlderImages {
	var out []OlderImages
	for vi, v := range []struct {
		name string
		w, h int
		keep int
	}{{"stub", 1920, 1080, 2}, {"downscaled 960x540", 960, 540, 0}, {"downscaled 480x270", 480, 270, 0}, {"full", 1920, 1080, 0}} {
		r := OlderImages{Variant: v.name}
		a, err := agent.New(agent.Config{Model: c, Tools: tools.NewRegistry(), MaxSteps: 1, MaxTokens: 1,
			System:      fmt.Sprintf("Variant %d.", vi), // a different prompt start: nothing cached
			ImageWindow: agent.ImageWindow{Keep: v.keep, Batch: min(v.keep, 1)}})
		if err != nil {
			r.Err = err.Error()
			out = append(out, r)
			continue
		}
		var history []agent.Message
		for i := 1; i <= 10; i++ {
			w, h := v.w, v.h
			if i > 8 {
				w, h = 1920, 1080
			}
			png, err := screenshot(w, h, uint64(7000+i))
			if err != nil {
				r.Err = err.Error()
				break
			}
			msg := agent.Message{Role: "user", Content: fmt.Sprintf("Turn %d: what is on the screen?", i),
				Images: []tools.Image{{MIME: "image/png", Data: png}}}
			if i == 10 {
				f := a.Run(ctx, history, msg, nil)
				if f.Err != nil {
					r.Err = f.Err.Error()
					break
				}
				if tm := f.Final.Timings; tm != nil {
					r.PromptTokens = tm.PromptN + tm.CacheN
				}
				r.ColdSeconds = f.Final.TTFT.Seconds()
				ans := f.Final
				if ans.Content == "" {
					ans = agent.Message{Role: "assistant", Content: "(no answer)"}
				}
				g := a.Run(ctx, append(history, msg, ans), agent.Message{Role: "user", Content: "And the clock?"}, nil)
				if g.Err != nil {
					r.Err = g.Err.Error()
					break
				}
				r.CachedSeconds = g.Final.TTFT.Seconds()
			}
			history = append(history, msg, agent.Message{Role: "assistant", Content: fmt.Sprintf("Screen %d shows windows.", i)})
		}
		say("older images %s: prompt %d tokens, cold ttft %.3f s, cached ttft %.3f s %s", r.Variant, r.PromptTokens,
			r.ColdSeconds, r.CachedSeconds, r.Err)
		out = append(out, r)
	}
	return out
}

// startRaw starts llama-server as visor's plan starts the stand-in resident with MTP (q4_0 KV, 64K context) at
// checkpoint spacing step and waits until it is healthy.
func startRaw(ctx context.Context, server, model, mmproj, logPath string, step int) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	logf, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(server, "-m", model, "--mmproj", mmproj, "-c", "65536", "-ngl", "999", "-fa", "on",
		"-ctk", "q4_0", "-ctv", "q4_0", "-ub", "2048", "-b", "2048", "-np", "1", "--fit", "off",
		"--spec-type", "draft-mtp", "--spec-draft-n-max", "3", "--checkpoint-min-step", strconv.Itoa(step),
		"--host", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", nil, err
	}
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := engine.NewClient(url, "")
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var h map[string]any
		if err := c.Get(ctx, "/health", &h); err == nil {
			return url, stop, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("llama-server at -cms %d not healthy after 3 minutes (log %s)", step, logPath)
}

func parseSteps(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-cut %q: %q is no checkpoint spacing (a positive number of tokens)", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}
