package gateway

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/visorhq/visor/session"
)

// unknownModel is the model label of requests naming no configured model.
const unknownModel = "unknown"

// metrics are the gateway's counters, written as Prometheus text by /metrics. Per-model counters live in
// maps under mu; the hot gauges are atomics.
type metrics struct {
	queueDepth atomic.Int64
	inflight   atomic.Int64
	swaps      atomic.Int64

	mu       sync.Mutex
	requests map[[2]string]int64 // model, status code
	repairs  map[[2]string]int64 // model, where (content, reasoning, parse_error)
	per      map[string]*modelStats
}

type modelStats struct {
	predictedN   int64
	predictedSec float64
	promptN      int64
	promptSec    float64
	draftN       int64
	draftOK      int64
	lastTPS      float64
	swapWaitSec  float64 // swap and load time requests waited for: exposed
	swapWaitN    int64
	loadSec      float64 // time engines took to become ready
	aheadN       int64   // queued requests whose images were evaluated while they waited
	aheadSec     float64 // the server's prompt time of those prefills: hidden from the requests' first token
}

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]int64{}, repairs: map[[2]string]int64{}, per: map[string]*modelStats{}}
}

func (m *metrics) stats(model string) *modelStats {
	s := m.per[model]
	if s == nil {
		s = &modelStats{}
		m.per[model] = s
	}
	return s
}

func (m *metrics) request(model string, status int) {
	m.mu.Lock()
	m.requests[[2]string{model, fmt.Sprint(status)}]++
	m.mu.Unlock()
}

func (m *metrics) repair(model, where string) {
	m.mu.Lock()
	m.repairs[[2]string{model, where}]++
	m.mu.Unlock()
}

// timings adds one response's llama-server timings.
func (m *metrics) timings(model string, t timings) {
	m.mu.Lock()
	s := m.stats(model)
	s.predictedN += int64(t.PredictedN)
	s.predictedSec += t.PredictedMS / 1000
	s.promptN += int64(t.PromptN)
	s.promptSec += t.PromptMS / 1000
	s.draftN += int64(t.DraftN)
	s.draftOK += int64(t.DraftNAccepted)
	if t.PredictedPerSecond > 0 {
		s.lastTPS = t.PredictedPerSecond
	}
	m.mu.Unlock()
}

// queuedPrefill counts one queued request's prefill and its prompt (image encode included) time.
func (m *metrics) queuedPrefill(model string, t *session.Timings) {
	m.mu.Lock()
	s := m.stats(model)
	s.aheadN++
	if t != nil {
		s.aheadSec += t.PromptMS / 1000
	}
	m.mu.Unlock()
}

func (m *metrics) swapWait(model string, d, load time.Duration) {
	m.mu.Lock()
	s := m.stats(model)
	if d > 0 {
		s.swapWaitSec += d.Seconds()
		s.swapWaitN++
	}
	s.loadSec += load.Seconds()
	m.mu.Unlock()
}

// VRAM reports the GPU memory in use and in total, in bytes; ok false when it is not known (no NVML).
type VRAM func() (used, total uint64, ok bool)

func (m *metrics) write(w io.Writer, loaded map[string]bool, vram VRAM) {
	p := func(name, typ, help string) { fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ) }
	m.mu.Lock()
	defer m.mu.Unlock()
	p("visor_gateway_requests_total", "counter", "Chat requests answered, by model and HTTP status.")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sortPairs(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "visor_gateway_requests_total{model=\"%s\",code=\"%s\"} %d\n", label(k[0]), label(k[1]), m.requests[k])
	}
	p("visor_gateway_tool_call_repairs_total", "counter", "Tool calls the gateway parsed from text the server left them in (where: content, reasoning, parse_error).")
	keys = keys[:0]
	for k := range m.repairs {
		keys = append(keys, k)
	}
	sortPairs(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "visor_gateway_tool_call_repairs_total{model=\"%s\",where=\"%s\"} %d\n", label(k[0]), label(k[1]), m.repairs[k])
	}
	p("visor_gateway_queue_depth", "gauge", "Requests waiting for a slot or a model swap.")
	fmt.Fprintf(w, "visor_gateway_queue_depth %d\n", m.queueDepth.Load())
	p("visor_gateway_inflight", "gauge", "Requests being answered.")
	fmt.Fprintf(w, "visor_gateway_inflight %d\n", m.inflight.Load())
	p("visor_gateway_swaps_total", "counter", "Model swaps (loads that unloaded another model).")
	fmt.Fprintf(w, "visor_gateway_swaps_total %d\n", m.swaps.Load())
	names := sortedNames(loaded)
	p("visor_gateway_model_loaded", "gauge", "1 while the model's engine is loaded.")
	for _, n := range names {
		v := 0
		if loaded[n] {
			v = 1
		}
		fmt.Fprintf(w, "visor_gateway_model_loaded{model=\"%s\"} %d\n", label(n), v)
	}
	type col struct {
		name, typ, help string
		// val returns false when the series has no value yet (a ratio over nothing): no sample is written.
		val func(*modelStats) (float64, bool)
	}
	cols := []col{
		{"visor_gateway_tokens_predicted_total", "counter", "Tokens generated (llama-server timings).", ok(func(s *modelStats) float64 { return float64(s.predictedN) })},
		{"visor_gateway_predicted_seconds_total", "counter", "Time spent generating them.", ok(func(s *modelStats) float64 { return s.predictedSec })},
		{"visor_gateway_tokens_per_second", "gauge", "Generation speed of the last response.", ok(func(s *modelStats) float64 { return s.lastTPS })},
		{"visor_gateway_prompt_tokens_total", "counter", "Prompt tokens evaluated (not cached).", ok(func(s *modelStats) float64 { return float64(s.promptN) })},
		{"visor_gateway_prompt_seconds_total", "counter", "Time spent evaluating prompts (image encoding included).", ok(func(s *modelStats) float64 { return s.promptSec })},
		{"visor_gateway_draft_tokens_total", "counter", "Speculative draft tokens proposed.", ok(func(s *modelStats) float64 { return float64(s.draftN) })},
		{"visor_gateway_draft_accepted_total", "counter", "Speculative draft tokens accepted.", ok(func(s *modelStats) float64 { return float64(s.draftOK) })},
		{"visor_gateway_draft_acceptance_ratio", "gauge", "Accepted over proposed draft tokens (no sample before any draft).", func(s *modelStats) (float64, bool) {
			if s.draftN == 0 {
				return 0, false
			}
			return float64(s.draftOK) / float64(s.draftN), true
		}},
		{"visor_gateway_swap_exposed_seconds_total", "counter", "Swap and load time requests waited for (none of it is hidden: the gateway loads on demand).", ok(func(s *modelStats) float64 { return s.swapWaitSec })},
		{"visor_gateway_swap_exposed_requests_total", "counter", "Requests that waited for a swap or load.", ok(func(s *modelStats) float64 { return float64(s.swapWaitN) })},
		{"visor_gateway_load_seconds_total", "counter", "Time engines took to become ready.", ok(func(s *modelStats) float64 { return s.loadSec })},
		{"visor_gateway_queued_prefills_total", "counter", "Queued requests whose images were evaluated in a spare server slot while they waited.", ok(func(s *modelStats) float64 { return float64(s.aheadN) })},
		{"visor_gateway_encode_hidden_seconds_total", "counter", "Prompt and image-encode time of those prefills: taken off the requests' time to first token.", ok(func(s *modelStats) float64 { return s.aheadSec })},
	}
	models := sortedNames(m.per)
	for _, c := range cols {
		p(c.name, c.typ, c.help)
		for _, n := range models {
			if v, ok := c.val(m.per[n]); ok {
				fmt.Fprintf(w, "%s{model=\"%s\"} %g\n", c.name, label(n), v)
			}
		}
	}
	if vram != nil {
		if used, total, ok := vram(); ok {
			p("visor_gateway_vram_used_bytes", "gauge", "GPU memory in use (NVML).")
			fmt.Fprintf(w, "visor_gateway_vram_used_bytes %d\n", used)
			p("visor_gateway_vram_total_bytes", "gauge", "GPU memory in total (NVML).")
			fmt.Fprintf(w, "visor_gateway_vram_total_bytes %d\n", total)
		}
	}
}

// ok wraps a series that always has a value.
func ok(f func(*modelStats) float64) func(*modelStats) (float64, bool) {
	return func(s *modelStats) (float64, bool) { return f(s), true }
}

// label escapes a label value as the Prometheus text format wants: backslash, double quote and line feed only
// (Go's %q escapes tabs and non-ASCII too, which Prometheus rejects, failing the whole scrape).
func label(v string) string {
	if !strings.ContainsAny(v, "\\\"\n") {
		return v
	}
	return labelEscaper.Replace(v)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func sortPairs(k [][2]string) {
	sort.Slice(k, func(i, j int) bool {
		if k[i][0] != k[j][0] {
			return k[i][0] < k[j][0]
		}
		return k[i][1] < k[j][1]
	})
}
