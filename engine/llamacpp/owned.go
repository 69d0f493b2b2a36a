package llamacpp

import (
	"errors"
	"fmt"
	"strings"
)

// ownedArgs are llama-server's flags that visor sets itself from its own settings; an extra argument that
// repeats one wins (llama-server takes the last) and leaves visor wrong about the server it started: on another
// address it waits for a server that never answers there, with another model or projector it plans, names and
// stores the wrong one, with TLS of its own it refuses visor's plain health checks. Each maps to what to use
// instead. (--api-key is not among them: llama-server's /health answers without the key, and a request without
// it fails at once with a 401 that says so; --api-key for visor's own client pairs with it.)
var ownedArgs = map[string]string{
	"--host":          "visor picks the loopback address it connects to (use visor serve, or the gateway's addr:, to serve others)",
	"--port":          "visor picks a free port and connects to it (give a gateway model port: in models.yaml for a fixed engine port; use visor serve, or the gateway's addr:, to serve others)",
	"-m":              "give the model as --model (or path: in a config or agent file)",
	"--model":         "give the model as --model (or path: in a config or agent file)",
	"-mu":             "download the model first and give its file as --model",
	"--model-url":     "download the model first and give its file as --model",
	"-hf":             "download the model first and give its file as --model",
	"-hfr":            "download the model first and give its file as --model",
	"--hf-repo":       "download the model first and give its file as --model",
	"-hff":            "download the model first and give its file as --model",
	"--hf-file":       "download the model first and give its file as --model",
	"-mm":             "give the projector as --mmproj (or mmproj: in a config or agent file)",
	"--mmproj":        "give the projector as --mmproj (or mmproj: in a config or agent file)",
	"-mmu":            "download the projector first and give its file as --mmproj",
	"--mmproj-url":    "download the projector first and give its file as --mmproj",
	"--ssl-key-file":  "visor talks to its engine over plain HTTP on loopback; put TLS in front of the gateway instead",
	"--ssl-cert-file": "visor talks to its engine over plain HTTP on loopback; put TLS in front of the gateway instead",
}

// ErrOwnedArg is wrapped by CheckExtraArgs' error.
var ErrOwnedArg = errors.New("an engine argument visor sets itself")

// CheckExtraArgs refuses extra llama-server arguments (--server-arg, server_args: in a config or agent file,
// args: of a gateway model, VISOR_SERVER_ARGS) that set what visor owns, naming the argument and what to use
// instead. An item holding several words ("--port 9000" as one YAML item) is checked word by word, and
// --flag=value counts as the flag.
func CheckExtraArgs(args []string) error {
	var errs []error
	for _, item := range args {
		for _, w := range strings.Fields(item) {
			name, _, _ := strings.Cut(w, "=")
			if fix, ok := ownedArgs[name]; ok {
				errs = append(errs, fmt.Errorf("engine argument %q is %w: %s; remove it from --server-arg, server_args:, the gateway's args: or VISOR_SERVER_ARGS",
					w, ErrOwnedArg, fix))
			}
		}
	}
	return errors.Join(errs...)
}
