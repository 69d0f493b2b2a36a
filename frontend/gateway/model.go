package gateway

import (
	"fmt"

	"github.com/visorhq/visor/session"
)

// Engine is one model's server, as the gateway's models are started; *conductor.Conductor implements it. The
// session service's Engines decide which are loaded and admit requests onto them.
type Engine = session.ModelEngine

// Model is one name the gateway serves.
type Model struct {
	Name string
	// Open returns a fresh engine for the model; nothing need be started until its EnsureReady. The gateway calls
	// it on every load (a closed engine is not reused).
	Open func() Engine
	// Group: models of one non-empty group may stay loaded together; any other load unloads them first.
	Group string
	// Remote models (another server) take no memory here: they are never unloaded and never swap others out.
	Remote bool
	// Slots is how many requests run on the model at once (its llama-server --parallel); more wait in the
	// gateway's queue. Default 1.
	Slots int
	// ServerSlots is the server's own slot count when it has more than Slots: then every request is pinned to
	// a slot (id_slot, the one that served its conversation last where it is free), and a request that has to
	// wait has its images evaluated in a spare slot meanwhile, and is sent to that slot. Default Slots.
	ServerSlots int
	// UpstreamModel replaces the request's "model" before it is sent on (a remote server's own name); empty sends
	// the body unchanged.
	UpstreamModel string
	// ToolFormat is the dialect calls left in text are parsed as; ToolsAsText renders tools into the prompt.
	ToolFormat  string
	ToolsAsText bool
	// APIKey is sent to the server (remote endpoints).
	APIKey string

	// What /v1/models says of the model. Vision: it has a projector, so requests may carry images (one without
	// is refused before the engine); Embeddings: its server runs with --embeddings; Ctx: the context length
	// it is started with (0: the model's own, read from the server once loaded); MTP: it speculates with MTP.
	Vision, Embeddings, MTP bool
	Ctx                     int
	// Aliases are other names requests may use for the model; answers carry the name the request used.
	Aliases []string
}

// engineModels checks the gateway's models and gives the session service's view of them.
func engineModels(models []Model) ([]session.EngineModel, map[string]Model, error) {
	byName := map[string]Model{}
	var out []session.EngineModel
	for _, md := range models {
		if md.Name == "" || md.Open == nil {
			return nil, nil, fmt.Errorf("gateway: model %q needs a name and an Open function", md.Name)
		}
		if _, dup := byName[md.Name]; dup {
			return nil, nil, fmt.Errorf("gateway: model %q is listed twice", md.Name)
		}
		if md.Slots <= 0 {
			md.Slots = 1
		}
		byName[md.Name] = md
		em := session.EngineModel{Name: md.Name, Open: md.Open, Group: md.Group, Remote: md.Remote, Slots: md.Slots}
		if md.ServerSlots > md.Slots && !md.Remote {
			em.ServerSlots = md.ServerSlots
		}
		out = append(out, em)
	}
	return out, byName, nil
}
