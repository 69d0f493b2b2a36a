package swap_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

func TestCostsJSONRoundTrip(t *testing.T) {
	for name, c := range swap.Presets() {
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"swap_in":"`) || !strings.Contains(string(data), `"relaunch":"`) {
			t.Fatalf("%s: durations are not written as strings: %s", name, data)
		}
		back, err := swap.ParseCosts(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("%s: round trip changed the model:\n%+v\n%+v", name, c, back)
		}
	}
}

func TestParseCostsPartialAndErrors(t *testing.T) {
	// A file may give only what it measured; the rest stays the seed's.
	c, err := swap.ParseCosts([]byte(`{"profiles":["resident","text-only"],
		"tokens_per_second":{"resident":180,"text-only":190},"relaunch":"6s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Relaunch.D() != 6*time.Second || c.SwapIn != swap.SeedCosts().SwapIn || c.TokensPerSecond[swap.MTPSwap] != 0 {
		t.Fatalf("partial file: %+v", c)
	}
	cases := map[string]string{
		`{"relaunch": 5}`:                                          "durations as strings",
		`{"relanch": "5s"}`:                                        "unknown field",
		`{"profiles": ["resident"]}`:                               `tokens_per_second["resident"]`,
		`{"profiles": ["warp-drive"]}`:                             "unknown profile",
		`{"draft_acceptance": 1.5}`:                                "draft_acceptance",
		`{"prefill_tokens_per_second": 0}`:                         "prefill_tokens_per_second",
		`{"profiles":["mtp-swap"],"swap_in":"0s","swap_out":"0s"}`: "swap_in/swap_out",
		`{"profiles":["vision-endpoint"],"tokens_per_second":{"vision-endpoint":200}}`: "endpoint",
		`{"relaunch": "-5s"}`:                   "negative",
		`{"prefill_tokens_per_second": 1e-300}`: "prefill_tokens_per_second",
		`{"encode_cpu_per_token": "2h"}`:        "not a measurement",
	}
	for in, want := range cases {
		if _, err := swap.ParseCosts([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want it to mention %q", in, err, want)
		}
	}
}

func TestUpdate(t *testing.T) {
	c := swap.H200Costs()
	orig := swap.H200Costs()
	// The first measurement replaces the default.
	c1 := c.Update(swap.Sample{ImageTokens: 1000, Encode: swap.Duration(500 * time.Millisecond)})
	if c1.EncodeGPU.D() != 500*time.Microsecond {
		t.Fatalf("first sample: %s per token, want 500µs", c1.EncodeGPU.D())
	}
	if !reflect.DeepEqual(c, orig) {
		t.Fatal("Update changed its receiver")
	}
	// The second is a running mean of two, and from the fifth on each moves the estimate by MinAlpha.
	c2 := c1.Update(swap.Sample{ImageTokens: 1000, Encode: swap.Duration(300 * time.Millisecond)})
	if c2.EncodeGPU.D() != 400*time.Microsecond {
		t.Fatalf("second sample: %s, want 400µs", c2.EncodeGPU.D())
	}
	cn := c2
	for range 3 {
		cn = cn.Update(swap.Sample{ImageTokens: 1000, Encode: swap.Duration(400 * time.Millisecond)})
	}
	before := cn.EncodeGPU.D()
	cn = cn.Update(swap.Sample{ImageTokens: 1000, Encode: swap.Duration(1400 * time.Millisecond)})
	if got, want := cn.EncodeGPU.D(), before+time.Duration(swap.MinAlpha*float64(1400*time.Microsecond-before)); got != want {
		t.Fatalf("EWMA step: %s, want %s", got, want)
	}
	// CPU encodes land in their own field; nonsense is ignored.
	c3 := c.Update(swap.Sample{ImageTokens: 100, Encode: swap.Duration(2 * time.Second), OnCPU: true})
	if c3.EncodeCPU.D() != 20*time.Millisecond || c3.EncodeGPU != c.EncodeGPU {
		t.Fatalf("cpu sample: cpu %s gpu %s", c3.EncodeCPU.D(), c3.EncodeGPU.D())
	}
	if c4 := c.Update(swap.Sample{SwapIn: swap.Duration(-time.Second), Drafted: 3, Accepted: 9}); !reflect.DeepEqual(c4.SwapIn, c.SwapIn) || c4.DraftAcceptance != c.DraftAcceptance {
		t.Fatalf("implausible sample was folded in: %+v", c4)
	}
}

// A generation measured at poor acceptance is recorded at the model's acceptance, so speed and acceptance are
// not counted twice; the speed at the poor acceptance comes back out of TokensPerSecondAt.
func TestUpdateNormalisesSpeedByAcceptance(t *testing.T) {
	c := swap.H200Costs()
	// All drafts rejected: §9 measured 78–83 t/s. One step makes one token.
	c1 := c.Update(swap.Sample{Profile: swap.Resident, Generated: 800, GenTime: swap.Duration(10 * time.Second),
		Drafted: 3000, Accepted: 0})
	if c1.DraftAcceptance != 0 {
		t.Fatalf("acceptance %v, want 0 after one all-rejected sample", c1.DraftAcceptance)
	}
	if got := c1.TokensPerSecondAt(swap.Resident, 0); math.Abs(got-80) > 1e-9 {
		t.Fatalf("speed at acceptance 0: %v, want the measured 80", got)
	}
	// The model predicts §9's synthetic speed from the all-rejected run within its measured range (178–208).
	if got := c1.TokensPerSecondAt(swap.Resident, 1.6/3); got < 178 || got > 208 {
		t.Fatalf("predicted speed at mean length 2.6: %v", got)
	}
	if got := c.TokensPerSecondAt(swap.VisionNoMTP, 0); got != c.TokensPerSecond[swap.VisionNoMTP] {
		t.Fatalf("acceptance changed a profile without speculation: %v", got)
	}
}

func TestFlagsKey(t *testing.T) {
	a := swap.FlagsKey([]string{"--port", "8080", "-m", "/x/m.gguf", "-c", "65536", "--mmproj-gpu-swap", "-fa", "on", "--log-file", "x"})
	b := swap.FlagsKey([]string{"--port", "9090", "-m", "/x/m.gguf", "-c", "65536", "--mmproj-gpu-swap", "-fa", "on"})
	if a != b || a != "-c 65536 --mmproj-gpu-swap -fa on" {
		t.Fatalf("keys %q and %q", a, b)
	}
	if swap.FlagsKey([]string{"-c", "4096"}) == a {
		t.Fatal("different context sizes share a key")
	}
}

// TestParseCostsKeepsTheKeyWhole reads back a CPU engine's model: its key has no GPU, which JSON leaves out, and
// the parsed key must not take the seed's GPU or flags in its place (it names the engine the numbers are from).
func TestParseCostsKeepsTheKeyWhole(t *testing.T) {
	c := swap.SeedCosts()
	c.Key = swap.Key{Model: "tiny.gguf", Projector: "proj.gguf"}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := swap.ParseCosts(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != c.Key {
		t.Fatalf("key read back as %+v, want %+v", got.Key, c.Key)
	}
}
