package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const shippedTrace = "../../engine/swap/testdata/traces/chat-screenshots.json"

func TestSimulateCommand(t *testing.T) {
	out, _, err := visor(t, "simulate", "--trace", shippedTrace, "--costs", "h200", "--explain")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"trace chat-screenshots", "scheduler", "reactive", "static resident (best)",
		"static text-only", "cannot serve", "warm-pipeline", "prefill"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// JSON, with a cost file that changes one number: a slower relaunch must show in the result.
	dir := t.TempDir()
	costs := filepath.Join(dir, "costs.json")
	if err := os.WriteFile(costs, []byte(`{"profiles":["mtp-swap","text-only"],
		"tokens_per_second":{"mtp-swap":240,"text-only":250}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = visor(t, "simulate", shippedTrace, "--costs", costs, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var reps []struct {
		Trace      string
		BestStatic string `json:"best_static"`
		Results    []struct {
			Policy     string
			EngineWait int64 `json:"engine_wait"`
			Events     []any
		}
	}
	if err := json.Unmarshal([]byte(out), &reps); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(reps) != 1 || reps[0].BestStatic != "static mtp-swap" || len(reps[0].Results) != 4 ||
		reps[0].Results[0].EngineWait <= 0 || reps[0].Results[0].Events != nil {
		t.Fatalf("report %+v", reps)
	}
}

func TestSimulateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"name":"b","steps":[{"prompt_tokens":1,"output_tokens":1,"user":3}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"give --trace":         {"simulate"},
		"steps[0]":             {"simulate", "--trace", bad},
		"not a regular file":   {"simulate", "--trace", fifo},
		"no such file":         {"simulate", "--trace", filepath.Join(dir, "missing.json")},
		"or name a preset":     {"simulate", "--trace", shippedTrace, "--costs", "nope"},
		"durations as strings": {"simulate", "--trace", bad, "--costs", "seed"},
	}
	for want, args := range cases {
		if _, _, err := visor(t, args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: err %v, want it to mention %q", args, err, want)
		}
	}
}
