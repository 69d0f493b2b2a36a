package config

import (
	"fmt"
	"strings"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/internal/userpath"
)

// GatewayModel is one model of the gateway's models file as its engine is started: the model description every
// command shares, and what only a gateway entry has.
type GatewayModel struct {
	Model
	APIKey     string   // the endpoint's key from the command line (a file names a variable instead)
	Embeddings bool     // its server answers /v1/embeddings
	Env        []string // added to its llama-server's environment
	Port       int      // its llama-server's fixed port, 0 for a free one
}

// GatewaySpec is the engine spec of the gateway model called name over base (the command line's engine flags,
// which the entry overrides as a config file's model does), checked.
func GatewaySpec(name string, base launch.Spec, g GatewayModel) (launch.Spec, error) {
	s := base
	s.Projector, s.APIKey = "", ""
	g.Path, g.MMProj, g.Parallel = userpath.Expand(g.Path), userpath.Expand(g.MMProj), max(g.Parallel, 1)
	ApplyModel(&s, g.Model, Set{})
	if g.APIKeyEnv == "" && g.APIKey != "" {
		s.APIKey = g.APIKey
	}
	if g.Embeddings {
		s.ExtraArgs = append(append([]string(nil), s.ExtraArgs...), "--embeddings")
		// A chat model's own pooling is often none, which llama-server's /v1/embeddings refuses.
		if !hasArg(s.ExtraArgs, "--pooling") {
			s.ExtraArgs = append(s.ExtraArgs, "--pooling", "mean")
		}
	}
	s.Env, s.Port = g.Env, g.Port
	if err := s.Validate(); err != nil {
		return launch.Spec{}, fmt.Errorf("model %q: %w", name, err)
	}
	return s, nil
}

func hasArg(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}
