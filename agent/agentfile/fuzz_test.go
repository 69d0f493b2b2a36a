package agentfile_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/visorhq/visor/agent/agentfile"
)

// FuzzParse feeds arbitrary bytes to the agent-file decoder: it must never panic, every refusal must be
// ErrInvalid naming the file, and every spec it accepts must hold the invariants check promises.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "---\n", "name: a\nmodel: {endpoint: http://x}\n",
		"name: a\nmodel: {endpoint: http://x}\n---\nname: b\n",
		"name: a\nmodel: {path: m.gguf, ctx: 4096, parallel: 2}\ntemperature: .nan\nmax_steps: 0\n",
		"name: a\nmodel: {endpoint: http://x}\nmcp: [{name: fs, command: [x]}, {name: w, url: 'http://h'}]\n",
		"name: a\nmodel: {endpoint: http://x}\nallow_shell: [ls, /bin/cat]\nallow_shell_launchers: [sh]\n",
		"name: &a x\nmodel: *a\n", "name: a\nmodel:\n  endpoint: http://x\n  colour: red\n", "{name: [\n",
		"name: a\nmodel: {endpoint: http://x}\nsystem: !!binary aGVsbG8=\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := agentfile.Parse(data, "fuzz.yaml")
		if err != nil {
			if !errors.Is(err, agentfile.ErrInvalid) || !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %v is not ErrInvalid naming the file", err)
			}
			return
		}
		if s.Name == "" || (s.Model.Path == "") == (s.Model.Endpoint == "") {
			t.Fatalf("accepted without a name or with not exactly one model source: %+v", s)
		}
		if s.MaxSteps < 0 || s.MaxTokens < 0 || s.Model.Ctx < 0 || s.Model.Parallel < 0 {
			t.Fatalf("accepted a negative limit: %+v", s)
		}
		if tp := s.Temperature; tp != nil && (math.IsNaN(float64(*tp)) || *tp < 0 || *tp > 2) {
			t.Fatalf("accepted temperature %v", *tp)
		}
		for _, n := range s.AllowShell {
			if strings.Contains(n, "/") {
				t.Fatalf("accepted a path in allow_shell: %q", n)
			}
		}
	})
}
