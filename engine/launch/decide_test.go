package launch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/engine/vram"
)

func TestDecideLaunch(t *testing.T) {
	for _, c := range []struct {
		endpoint, haveLast bool
		mode               string
		reuse              bool
		want               action
	}{
		{true, false, "", true, actRemote},
		{true, true, "", false, actRemote},
		{true, true, "vision-cpu", true, actRemote},
		{false, false, "", true, actReuse},
		{false, false, "vision-cpu", true, actReuse},
		{false, false, "", false, actStart},
		{false, true, "", true, actRestart}, // a crash: the same server at the same address
		{false, true, "", false, actRestart},
		{false, true, "vision-cpu", true, actStart}, // a relaunch into another mode: by the plan, anew
		{false, true, "resident", false, actStart},
	} {
		if got := decideLaunch(c.endpoint, c.haveLast, c.mode, c.reuse); got != c.want {
			t.Errorf("decideLaunch(endpoint %v, last %v, mode %q, reuse %v) = %s, want %s", c.endpoint, c.haveLast,
				c.mode, c.reuse, got, c.want)
		}
	}
}

func TestDecidePlan(t *testing.T) {
	other := errors.New("model.gguf: truncated header")
	for _, c := range []struct {
		plan    string
		planErr error
		planned bool
		wantErr string
	}{
		{"off", nil, false, ""},
		{"off", other, false, ""},
		{"auto", nil, true, ""},
		{"auto", fmt.Errorf("nvml: %w", vram.ErrNoGPU), false, ""}, // nothing to place: the CPU, as asked
		{"auto", other, false, "--plan auto: model.gguf: truncated header (use --plan off"},
		{"maybe", nil, false, `--plan "maybe": use auto or off`},
	} {
		planned, err := decidePlan(c.plan, c.planErr)
		if planned != c.planned || (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("decidePlan(%q, %v) = %v, %v; want %v, %q", c.plan, c.planErr, planned, err, c.planned, c.wantErr)
		}
	}
}

func TestNeedsWarmup(t *testing.T) {
	on := Spec{Warmup: true}
	for _, c := range []struct {
		st   Started
		want bool
	}{
		{Started{Spec: on, GPU: "NVIDIA H200"}, true},
		{Started{Spec: Spec{}, GPU: "NVIDIA H200"}, false}, // --warmup=false
		{Started{Spec: on}, false},                         // the CPU compiles nothing
		{Started{Spec: on, Remote: "http://gpu-box:8080", GPU: ""}, false},
	} {
		if got := needsWarmup(c.st); got != c.want {
			t.Errorf("needsWarmup(%+v) = %v", c.st, got)
		}
	}
}

// The cost model's identity and defaults come from where the launch placed the engine, whatever the GPU is
// called.
func TestStartedCosts(t *testing.T) {
	vision := Spec{Model: "/m/qwen.gguf", Projector: "/m/mmproj.gguf"}
	for _, c := range []struct {
		name         string
		st           Started
		encodesOnCPU bool
		profiles     []swap.Profile
		key          swap.Key
	}{
		{"CPU", Started{Spec: vision, Args: []string{"-m", "/m/qwen.gguf", "-c", "4096"}}, true,
			[]swap.Profile{swap.VisionCPU}, swap.Key{Model: "qwen.gguf", Projector: "mmproj.gguf", Flags: "-c 4096"}},
		{"CPU text", Started{Spec: Spec{Model: "/m/qwen.gguf"}}, true, []swap.Profile{swap.TextOnly},
			swap.Key{Model: "qwen.gguf"}},
		{"resident on some GPU", Started{Spec: vision, Mode: "resident", GPU: "Some Card", ProjectorOnGPU: true}, false,
			swap.H200Costs().Profiles, swap.Key{Model: "qwen.gguf", Projector: "mmproj.gguf", GPU: "Some Card"}},
		{"swap mode on an H200", Started{Spec: vision, Mode: "mtp-swap", GPU: "NVIDIA H200", ProjectorOnGPU: true}, false,
			swap.SeedCosts().Profiles, swap.Key{Model: "qwen.gguf", Projector: "mmproj.gguf", GPU: "NVIDIA H200"}},
		{"encoder kept on the CPU", Started{Spec: vision, Mode: "vision-cpu", GPU: "NVIDIA H200"}, true,
			swap.SeedCosts().Profiles, swap.Key{Model: "qwen.gguf", Projector: "mmproj.gguf", GPU: "NVIDIA H200"}},
		{"remote", Started{Spec: Spec{Endpoint: "http://x"}, Remote: "http://x"}, false, swap.SeedCosts().Profiles,
			swap.Key{Model: "http://x", GPU: "remote"}},
	} {
		if got := c.st.EncodesOnCPU(); got != c.encodesOnCPU {
			t.Errorf("%s: EncodesOnCPU = %v", c.name, got)
		}
		if got := c.st.DefaultCosts().Profiles; fmt.Sprint(got) != fmt.Sprint(c.profiles) {
			t.Errorf("%s: default profiles %v, want %v", c.name, got, c.profiles)
		}
		if got := c.st.CostKey(); got != c.key {
			t.Errorf("%s: key %+v, want %+v", c.name, got, c.key)
		}
	}
}

func TestServerPhase(t *testing.T) {
	for line, want := range map[string]string{
		"0.00.019.574 I srv    load_model: loading model '/m/x.gguf'":              "load_model: loading model '/m/x.gguf'",
		"0.00.037.958 I srv  llama_server: model loaded":                           "llama_server: model loaded",
		"0.00.018.118 W srv  llama_server: security: no API key is set":            "",
		"0.00.135.084 I slot get_availabl: id  0 | task -1 | selected slot by LRU": "",
	} {
		got, ok := serverPhase(line)
		if got != want || ok != (want != "") {
			t.Errorf("serverPhase(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
}

// Sessions record their model; an endpoint's credentials must not be stored with it.
func TestLabelCarriesNoCredentials(t *testing.T) {
	got := Spec{Endpoint: "http://alice:s3cret@gpu-box:8080/v1"}.Label()
	if strings.Contains(got, "s3cret") || strings.Contains(got, "alice") || !strings.Contains(got, "gpu-box:8080") {
		t.Errorf("Label = %q", got)
	}
}

// Every field that changes what the server runs changes the key, so a served engine is never reused for another
// spec.
func TestKeyCoversTheSpec(t *testing.T) {
	base := Spec{Model: "/m/a.gguf", Projector: "/m/p.gguf", Ctx: 4096, Slots: 1, Plan: "auto", GPU: "auto"}
	seen := map[string]string{base.Key().ID(): "base"}
	for name, s := range map[string]Spec{
		"model": {Model: "/m/b.gguf", Projector: "/m/p.gguf", Ctx: 4096, Slots: 1, Plan: "auto", GPU: "auto"},
		"ctx":   {Model: "/m/a.gguf", Projector: "/m/p.gguf", Ctx: 8192, Slots: 1, Plan: "auto", GPU: "auto"},
		"slots": {Model: "/m/a.gguf", Projector: "/m/p.gguf", Ctx: 4096, Slots: 2, Plan: "auto", GPU: "auto"},
		"kv":    {Model: "/m/a.gguf", Projector: "/m/p.gguf", Ctx: 4096, Slots: 1, Plan: "auto", GPU: "auto", KVType: "q8_0"},
		"args":  {Model: "/m/a.gguf", Projector: "/m/p.gguf", Ctx: 4096, Slots: 1, Plan: "auto", GPU: "auto", ExtraArgs: []string{"-t", "2"}},
		"plan":  {Model: "/m/a.gguf", Projector: "/m/p.gguf", Ctx: 4096, Slots: 1, Plan: "off", GPU: "auto"},
	} {
		id := s.Key().ID()
		if other, dup := seen[id]; dup {
			t.Errorf("%s gives the same key as %s", name, other)
		}
		seen[id] = name
	}
	if (Spec{Model: "/m/a.gguf", Warmup: true, APIKey: "k"}).Key() != (Spec{Model: "/m/a.gguf"}).Key() {
		t.Error("warm-up and the API key change nothing the server runs, yet change the key")
	}
}

// --flash-attn reaches llama-server in both paths: as -fa without a plan, as the plan's own -fa with one (off
// also makes the plan count the attention scores' compute buffer); it is checked and it names another engine.
func TestFlashAttnOption(t *testing.T) {
	cfg := Spec{Model: "/m/a.gguf", FlashAttn: "off"}.plainConfig(llamacpp.Config{ExtraArgs: []string{"-t", "2"}})
	if got := strings.Join(cfg.CommandLine("127.0.0.1", 1), " "); !strings.Contains(got, "-fa off -t 2") {
		t.Errorf("plain start: %s", got)
	}
	if got := strings.Join(Spec{Model: "/m/a.gguf"}.plainConfig(llamacpp.Config{}).CommandLine("127.0.0.1", 1), " "); strings.Contains(got, "-fa") {
		t.Errorf("no --flash-attn, yet %s", got)
	}
	if err := (Spec{Model: "/m/a.gguf", FlashAttn: "yes"}).Validate(); err == nil || !strings.Contains(err.Error(), `--flash-attn "yes": use on, off or auto`) {
		t.Errorf("Validate: %v", err)
	}
	if (Spec{Model: "/m/a.gguf", FlashAttn: "off"}).Key().ID() == (Spec{Model: "/m/a.gguf"}).Key().ID() {
		t.Error("flash attention off shares the key of the default")
	}
}
