package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/enginetest"
)

// BenchmarkGatewayStream streams the same request (stories260K, 256 tokens) straight to llama-server and
// through the gateway, alternating, and reports both speeds, their ratio and the time to first token the
// gateway adds. The claim: ratio ≥ 0.99 and added TTFT < 2 ms.
//
//	go test ./frontend/gateway -run '^$' -bench GatewayStream -benchtime 40x
func BenchmarkGatewayStream(b *testing.B) {
	// One thread: the 2-core test machine then has a core for the client and the gateway, as any machine with more
	// cores than the server uses does, so the numbers show what the proxy adds rather than CPU contention.
	srv := enginetest.Start(b, llamacpp.Config{Model: enginetest.SharedModel(b, "stories260K.gguf"), Ctx: 2048, Parallel: 1, Threads: 1})
	gw, err := gateway.New(gateway.Config{Models: []gateway.Model{{Name: "stories", Open: func() gateway.Engine {
		return conductor.New(conductor.Config{Launch: func(context.Context, string) (conductor.Process, error) {
			return conductor.Remote{Addr: srv.URL()}, nil
		}})
	}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close(context.Background())
	front := httptest.NewServer(gw.Handler())
	defer front.Close()
	// No compression, as the gateway asks none of the server: both paths send the server the same request.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	body := `{"model":"stories","stream":true,"max_tokens":256,"ignore_eos":true,"temperature":0,"messages":[{"role":"user","content":"Once upon a time"}]}`
	run := func(url string) (ttft, gen time.Duration, tokens int) {
		start := time.Now()
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		// llama-server closes idle keep-alive connections; marking the request idempotent lets net/http resend
		// it on a fresh one in exactly that case (the header is not sent with a nil value).
		req.Header["X-Idempotency-Key"] = nil
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var first, last time.Time
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "data: ") && strings.Contains(l, `"content":"`) {
				last = time.Now()
				if first.IsZero() {
					first = last
				}
				tokens++
			}
		}
		if tokens < 2 {
			b.Fatalf("%s streamed %d tokens", url, tokens)
		}
		return first.Sub(start), last.Sub(first), tokens - 1
	}
	run(srv.URL()) // fill the prompt cache and the connections
	run(front.URL)
	var dGen, gGen time.Duration
	var dTok, gTok int
	var added []time.Duration
	var ratios []float64
	b.ResetTimer()
	for i := range b.N {
		// Alternate which goes first, so a change in the machine's load hits both alike; the medians of the
		// per-pair numbers then ignore the pairs a burst of other work landed on.
		var dt, gt, dg, gg time.Duration
		var dn, gn int
		if i%2 == 0 {
			dt, dg, dn = run(srv.URL())
			gt, gg, gn = run(front.URL)
		} else {
			gt, gg, gn = run(front.URL)
			dt, dg, dn = run(srv.URL())
		}
		dGen, dTok, gGen, gTok = dGen+dg, dTok+dn, gGen+gg, gTok+gn
		added = append(added, gt-dt)
		ratios = append(ratios, (float64(gn)/gg.Seconds())/(float64(dn)/dg.Seconds()))
		if testing.Verbose() {
			b.Logf("pair %d: ttft direct %s gateway %s; tok/s direct %.0f gateway %.0f", i, dt, gt,
				float64(dn)/dg.Seconds(), float64(gn)/gg.Seconds())
		}
	}
	b.StopTimer()
	direct := float64(dTok) / dGen.Seconds()
	through := float64(gTok) / gGen.Seconds()
	sort.Slice(added, func(i, j int) bool { return added[i] < added[j] })
	sort.Float64s(ratios)
	med, ratio := added[len(added)/2], ratios[len(ratios)/2]
	b.ReportMetric(direct, "direct-tok/s")
	b.ReportMetric(through, "gateway-tok/s")
	b.ReportMetric(ratio, "median-ratio")
	b.ReportMetric(through/direct, "overall-ratio")
	b.ReportMetric(float64(med.Microseconds())/1000, "added-ttft-ms")
	b.Logf("direct %.0f tok/s, gateway %.0f tok/s overall; median per-pair ratio %.3f; added time to first token: median %s over %d pairs",
		direct, through, ratio, med, len(added))
}
