package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// ChatTurn is one turn of the screenshot chat (-chat): visor's time to first token with the screenshot attached
// typing seconds before the message, against the engine's floor for the same conversation.
type ChatTurn struct {
	Turn int `json:"turn"`
	// TTFTSeconds is from Session.Turn to the first token, as the user sees it; FloorSeconds a raw request's time
	// to first token for the conversation as visor sent it plus a few words, every image of it cached.
	TTFTSeconds  float64  `json:"ttft_s"`
	FloorSeconds float64  `json:"floor_s"`
	Images       int      `json:"images_sent"` // image parts in visor's request
	PromptN      int      `json:"prompt_n"`
	PromptMS     float64  `json:"prompt_ms"`
	CacheN       int      `json:"cache_n"`
	FloorPromptN int      `json:"floor_prompt_n"`
	Explain      []string `json:"explain,omitempty"` // what was done ahead, as --explain prints it
	Err          string   `json:"error,omitempty"`
}

// ChatRun is the -chat result.
type ChatRun struct {
	Turns        int      `json:"turns"`
	TypingS      float64  `json:"typing_s"`
	StartSeconds float64  `json:"start_s"`
	Mode         string   `json:"mode"`
	NCtx         int      `json:"n_ctx"`
	KVLines      []string `json:"kv_lines"`
	Window       string   `json:"window"`
	// CompileSeconds are the uncounted warm-up turns' times (the first 1080p images after an install).
	CompileSeconds []float64  `json:"compile_s"`
	Results        []ChatTurn `json:"results"`
	// WarmedUpBeforeChat says serve's background warm-up had ended before the session service was made.
	WarmedUpBeforeChat bool `json:"warmed_up_before_chat"`
	// Again are a second session's first turns (-chat-again); AttachSend the same chat without lookahead, each
	// screenshot sent as soon as attached (-attach-send).
	Again      []ChatTurn `json:"again,omitempty"`
	AttachSend []ChatTurn `json:"attach_send,omitempty"`
	Checks     []string   `json:"checks"`
}

// recorder is a pass-through proxy in front of llama-server that keeps the last chat request's body: the floor
// request is built from exactly what visor sent.
type recorder struct {
	mu   sync.Mutex
	last []byte
}

func (rc *recorder) body() []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.last
}

func newRecorder(target string) (*recorder, *httptest.Server, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, nil, err
	}
	rc := &recorder{}
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" && r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rc.mu.Lock()
			rc.last = b
			rc.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
		}
		p.ServeHTTP(w, r)
	}))
	return rc, srv, nil
}

type fixedEngine struct{ r conductor.Ready }

func (e fixedEngine) EnsureReady(context.Context) (conductor.Ready, error) { return e.r, nil }
func (e fixedEngine) Recover(context.Context) (conductor.Ready, error)     { return e.r, nil }

// runChat starts `visor serve` as planned (plan auto, warm-up on) and drives a screenshot chat through visor's
// session service: each turn attaches a new 1080p screenshot, waits typing (the user typing; the attachment is
// evaluated meanwhile), sends a question and times the first token; then a raw request of the conversation
// exactly as visor sent it, with the answer and a few more words, is timed the same way (all its images are
// cached): the engine's floor for that conversation.
func runChat(ctx context.Context, visor, server, model, mmproj, state, out string, turns int, typing time.Duration) ChatRun {
	cr := ChatRun{Turns: turns, TypingS: typing.Seconds()}
	fail := func(err error) ChatRun {
		cr.Checks = append(cr.Checks, "FAIL chat: "+err.Error())
		return cr
	}
	_ = os.RemoveAll(state)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return fail(err)
	}
	cmd := exec.Command(visor, "serve", "--model", model, "--mmproj", mmproj, "--server", server)
	// VISOR_DEBUG: serve's info lines, the warm-up's end among them (read below).
	cmd.Env = append(os.Environ(), "VISOR_ENGINE_DIR="+state, "VISOR_DEBUG=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	// visor serve warms the engine up in the background after it is ready (docs/engine-notes.md §11): its
	// requests run in the server's slot. In one process the conductor tells the session service when that ends
	// (EventWarmedUp); here serve is another process, so its log line stands in for the event.
	var svcMu sync.Mutex
	var svcWarm *session.Service
	warmedUp := false
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, sc.Text())
			if strings.Contains(sc.Text(), "warming up the GPU: prompts done") {
				svcMu.Lock()
				warmedUp = true
				if svcWarm != nil {
					svcWarm.RecordEngineEvent(conductor.Event{Kind: conductor.EventWarmedUp})
				}
				svcMu.Unlock()
				say("chat: the engine's warm-up ended")
			}
			if i := strings.Index(sc.Text(), "engine started in mode "); i >= 0 {
				cr.Mode = sc.Text()[i+len("engine started in mode "):]
			}
		}
	}()
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	defer func() {
		stopServe(cmd)
		copyFile(filepath.Join(state, "logs", "llama-server.log"), filepath.Join(out, "llama-server-chat.log"))
	}()
	base, err := waitServing(stdout, func(line string) {
		say("chat serve: %s", line)
		if i := strings.Index(line, "engine started in mode "); i >= 0 {
			cr.Mode = line[i+len("engine started in mode "):]
		}
	})
	if err != nil {
		return fail(err)
	}
	cr.StartSeconds = time.Since(t0).Seconds()
	var props struct {
		NCtx int `json:"n_ctx"`
		Gen  struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if err := engine.NewClient(base, "").Get(ctx, "/props", &props); err == nil {
		cr.NCtx = max(props.NCtx, props.Gen.NCtx)
	}
	cr.KVLines = grepFile(filepath.Join(state, "logs", "llama-server.log"), "llama_kv_cache|type_k|n_ctx  |n_ctx =|using device")

	rec, proxy, err := newRecorder(base)
	if err != nil {
		return fail(err)
	}
	defer proxy.Close()
	svc, err := session.New(session.Config{
		Engine: fixedEngine{conductor.Ready{Client: engine.NewClient(proxy.URL, ""), URL: proxy.URL, Generation: 1}},
		Vision: session.VisionYes, Scheduler: &swap.Scheduler{Costs: swap.H200Costs()},
		Agent: session.AgentConfig{Tools: tools.NewRegistry(), MaxSteps: 1, MaxTokens: 16}})
	if err != nil {
		return fail(err)
	}
	svcMu.Lock()
	svcWarm = svc
	cr.WarmedUpBeforeChat = warmedUp
	svcMu.Unlock()
	// A first session of two screenshot turns, not counted: the first 1080p images after an install compile the
	// GPU pipelines for their shapes (over a minute on Vulkan, once: the driver keeps them), which is not what a
	// long session's turns cost.
	if warm, err := svc.Open(ctx, session.OpenOptions{Title: "warm-up"}); err == nil {
		for i := range 2 {
			t0 := time.Now()
			png, err := screenshot(1920, 1080, uint64(500+i))
			if err == nil {
				_, err = warm.Turn(ctx, "What is on the screen?", []tools.Image{{MIME: "image/png", Data: png}}, nil)
			}
			cr.CompileSeconds = append(cr.CompileSeconds, time.Since(t0).Seconds())
			say("chat warm-up turn %d: %.1f s %v", i+1, time.Since(t0).Seconds(), err)
		}
		warm.Close()
	}
	sess, err := svc.Open(ctx, session.OpenOptions{Title: "screenshot chat"})
	if err != nil {
		return fail(err)
	}
	lo, hi := 0, 0
	cr.Results = chatSession(ctx, sess, rec, base, turns, 1000, typing, true, &lo, &hi)
	cr.Window = fmt.Sprintf("%d to %d images a request", lo, hi)
	sess.Close()
	// A second session's first turns: a first turn slower than its floor again says the cost is the session's
	// (per conversation), not the engine's (once per process).
	if chatAgain > 0 {
		if again, err := svc.Open(ctx, session.OpenOptions{Title: "second chat"}); err == nil {
			cr.Again = chatSession(ctx, again, rec, base, chatAgain, 3000, typing, true, &lo, &hi)
			again.Close()
		}
	}
	// Attach-and-send: the same screenshots and questions sent as soon as attached, without lookahead.
	if chatAttachSend {
		plain, err := session.New(session.Config{
			Engine: fixedEngine{conductor.Ready{Client: engine.NewClient(proxy.URL, ""), URL: proxy.URL, Generation: 1}},
			Vision: session.VisionYes, Scheduler: &swap.Scheduler{Costs: swap.H200Costs()}, NoPrefill: true,
			Agent: session.AgentConfig{Tools: tools.NewRegistry(), MaxSteps: 1, MaxTokens: 16}})
		if err == nil {
			if as, err := plain.Open(ctx, session.OpenOptions{Title: "attach and send"}); err == nil {
				cr.AttachSend = chatSession(ctx, as, rec, base, turns, 1000, 0, false, &lo, &hi)
				as.Close()
			}
		}
	}
	cr.Checks = chatChecks(cr)
	return cr
}

// chatSession runs n screenshot turns in sess (screenshot seeds from seed+1), each attached typing before its
// question; with floor, each turn's floor request follows it. lo and hi track the images a request carried.
func chatSession(ctx context.Context, sess *session.Session, rec *recorder, base string, n int, seed uint64,
	typing time.Duration, floor bool, lo, hi *int) []ChatTurn {
	var out []ChatTurn
	for i := 1; i <= n; i++ {
		t := ChatTurn{Turn: i}
		png, err := screenshot(1920, 1080, seed+uint64(i))
		if err == nil {
			_, err = sess.Attach(ctx, png)
		}
		if err != nil {
			t.Err = err.Error()
			out = append(out, t)
			continue
		}
		time.Sleep(typing)
		var first time.Time
		start := time.Now()
		res, err := sess.Turn(ctx, fmt.Sprintf("Turn %d: what changed on the screen since the last one?", i), nil, func(ev agent.Event) {
			switch ev := ev.(type) {
			case agent.Token:
				if first.IsZero() {
					first = time.Now()
				}
			case agent.Explain:
				t.Explain = append(t.Explain, ev.Text)
			}
		})
		if err != nil || first.IsZero() {
			t.Err = fmt.Sprintf("turn: %v (first token seen: %v)", err, !first.IsZero())
			out = append(out, t)
			continue
		}
		t.TTFTSeconds = first.Sub(start).Seconds()
		if tm := res.Final.Timings; tm != nil {
			t.PromptN, t.CacheN, t.PromptMS = tm.PromptN, tm.CacheN, tm.PromptMS
		}
		body := rec.body()
		t.Images = bytes.Count(body, []byte(`"type":"image_url"`))
		if *lo == 0 || t.Images < *lo {
			*lo = t.Images
		}
		*hi = max(*hi, t.Images)
		if floor {
			d, pn, err := floorRequest(ctx, base, body, res.Final)
			if err != nil {
				t.Err = "floor: " + err.Error()
			}
			t.FloorSeconds, t.FloorPromptN = d.Seconds(), pn
		}
		say("chat turn %2d: %d images sent, ttft %.3f s (prompt %d, cached %d, %.0f ms), floor %.3f s (prompt %d): %.2f× %s", i,
			t.Images, t.TTFTSeconds, t.PromptN, t.CacheN, t.PromptMS, t.FloorSeconds, t.FloorPromptN,
			t.TTFTSeconds/max(t.FloorSeconds, 1e-9), t.Err)
		for _, e := range t.Explain {
			say("chat turn %2d explain: %s", i, e)
		}
		out = append(out, t)
	}
	return out
}

// floorRequest sends visor's last request body with the answer and a short question appended, streamed, one
// token, straight to llama-server, and times its first token. It extends the cached conversation (a hybrid
// model's cache can be extended, not cut back), carries the same images, and encodes none.
func floorRequest(ctx context.Context, base string, body []byte, answer agent.Message) (time.Duration, int, error) {
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, 0, fmt.Errorf("visor's request: %w", err)
	}
	msgs, _ := req["messages"].([]any)
	asst := map[string]any{"role": "assistant", "content": answer.Content}
	if answer.Reasoning != "" {
		asst["reasoning_content"] = answer.Reasoning
	}
	if answer.Content == "" {
		asst["content"] = "(no answer)"
	}
	req["messages"] = append(msgs, asst, map[string]any{"role": "user", "content": "And the clock?"})
	req["max_tokens"], req["stream"] = 1, true
	req["stream_options"] = map[string]any{"include_usage": true}
	b, err := json.Marshal(req)
	if err != nil {
		return 0, 0, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		return 0, 0, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Close = true // a fresh connection, as visor's would be after llama-server closed its last one
	start := time.Now()
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		return 0, 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, e)
	}
	var ttft time.Duration
	promptN := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") || line == "data: [DONE]" {
			continue
		}
		if ttft == 0 && (strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) ||
			strings.Contains(line, `"reasoning_content":"`)) {
			ttft = time.Since(start)
		}
		var ch struct {
			Timings *engine.Timings `json:"timings"`
		}
		if json.Unmarshal([]byte(line[6:]), &ch) == nil && ch.Timings != nil {
			promptN = ch.Timings.PromptN
		}
	}
	if ttft == 0 {
		return time.Since(start), promptN, fmt.Errorf("no token in the answer")
	}
	return ttft, promptN, sc.Err()
}

// chatChecks are issue 25's device lines: turn 30's time to first token at most 1.3× turn 2's, and every
// turn's within 1.25× the engine's floor for it.
func chatChecks(cr ChatRun) []string {
	var out []string
	ok := func(pass bool, f string, a ...any) {
		v := "PASS"
		if !pass {
			v = "FAIL"
		}
		out = append(out, v+" "+fmt.Sprintf(f, a...))
	}
	var t2, tl *ChatTurn
	worst, worstTurn := 0.0, 0
	errs := 0
	for i := range cr.Results {
		t := &cr.Results[i]
		if t.Err != "" {
			errs++
			continue
		}
		if t.Turn == 2 {
			t2 = t
		}
		tl = t
		if r := t.TTFTSeconds / max(t.FloorSeconds, 1e-9); r > worst {
			worst, worstTurn = r, t.Turn
		}
	}
	ok(errs == 0, "chat: %d of %d turns failed", errs, len(cr.Results))
	if t2 != nil && tl != nil {
		ok(tl.TTFTSeconds <= 1.3*t2.TTFTSeconds, "chat: turn %d's time to first token %.3f s is %.2f× turn 2's %.3f s (≤ 1.3)",
			tl.Turn, tl.TTFTSeconds, tl.TTFTSeconds/t2.TTFTSeconds, t2.TTFTSeconds)
	}
	ok(worst > 0 && worst <= 1.25, "chat: every turn within 1.25× the engine's floor (worst %.2f×, turn %d)", worst, worstTurn)
	if len(cr.AttachSend) > 0 {
		lo, hi := math.Inf(1), 0.0
		for i, t := range cr.Results {
			if i < len(cr.AttachSend) && cr.AttachSend[i].TTFTSeconds > 0 && t.TTFTSeconds > 0 {
				r := t.TTFTSeconds / cr.AttachSend[i].TTFTSeconds
				lo, hi = min(lo, r), max(hi, r)
			}
		}
		out = append(out, fmt.Sprintf("INFO chat: time to first token %.2f–%.2f× attach-and-send's, turn by turn", lo, hi))
	}
	return out
}
