package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// sampleLine is one sample of the Prometheus text format: label values escape only \, " and line feed.
var sampleLine = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? -?[0-9][0-9.e+-]*$`)

// TestGatewayMetricsStayBounded: requests for names nobody configured (tabs, quotes, non-ASCII among them) are
// counted under one "unknown" label, so /metrics does not grow with them, every line stays valid Prometheus
// text, and no ratio is NaN.
func TestGatewayMetricsStayBounded(t *testing.T) {
	f := sharedFixture(t)
	if _, err := f.client().CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "tiny",
		Messages: []openai.ChatCompletionMessage{user("hello")}}); err != nil {
		t.Fatal(err)
	}
	page := func() string {
		resp, err := http.Get(f.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	send := func(name string) {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, name)
		resp, err := http.Post(f.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("model %q: HTTP %d, want 404", name, resp.StatusCode)
		}
	}
	send("warm-up")
	before := len(strings.Split(page(), "\n"))
	for i := range 300 {
		send(fmt.Sprintf("gpt-%d\t\"x\"\\é\n", i))
	}
	p := page()
	if after := len(strings.Split(p, "\n")); after != before {
		t.Errorf("/metrics went from %d to %d lines after 300 unknown names: want them under one label", before, after)
	}
	if !strings.Contains(p, `visor_gateway_requests_total{model="unknown",code="404"} `) {
		t.Errorf("no unknown-model counter:\n%s", p)
	}
	for _, line := range strings.Split(strings.TrimSpace(p), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !sampleLine.MatchString(line) || strings.Contains(line, "NaN") {
			t.Errorf("not a valid Prometheus sample (or NaN): %q", line)
		}
	}
}
