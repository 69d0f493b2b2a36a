package llamacpp

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckExtraArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		bad  string // "" when allowed
	}{
		{[]string{"--temp", "0.6", "--poll", "0", "-fa", "on", "--embeddings"}, ""},
		{[]string{"--port", "9000"}, `"--port"`},
		{[]string{"--port=9000"}, `"--port=9000"`},
		{[]string{"--host", "0.0.0.0"}, `"--host"`},
		{[]string{"-m", "other.gguf"}, `"-m"`},
		{[]string{"--model", "other.gguf"}, `"--model"`},
		{[]string{"-hf", "org/repo"}, `"-hf"`},
		{[]string{"--mmproj", "p.gguf"}, `"--mmproj"`},
		{[]string{"--api-key", "k"}, ""},      // a 401 says so at once; visor's --api-key pairs with it
		{[]string{"--port 9000"}, `"--port"`}, // one YAML item holding two words
		{[]string{"--ssl-cert-file", "c.pem"}, `"--ssl-cert-file"`},
	} {
		err := CheckExtraArgs(c.args)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.bad != "" && (err == nil || !errors.Is(err, ErrOwnedArg) || !strings.Contains(err.Error(), c.bad) ||
			!strings.Contains(err.Error(), "remove it from --server-arg")):
			t.Errorf("%q: %v, want a refusal naming %s", c.args, err, c.bad)
		}
	}
}

// Start refuses them before anything runs: a server started on another port is one visor would wait for in vain.
func TestStartRefusesOwnedArgs(t *testing.T) {
	if _, err := Find(""); err != nil {
		t.Skip("no llama-server")
	}
	_, err := Start(t.Context(), Config{Model: "/nonexistent.gguf", ExtraArgs: []string{"--port", "9"}})
	if !errors.Is(err, ErrOwnedArg) {
		t.Fatalf("Start with --port among the extra arguments: %v", err)
	}
}
