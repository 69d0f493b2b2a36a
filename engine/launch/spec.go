package launch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/llamacpp"
)

// Spec is one engine as visor runs it: a model llama-server starts (placed by the VRAM plan), or a server
// already running at Endpoint. Every front end, agent file, config entry, stored session and gateway model
// describes its engine as a Spec; this is the one place the description becomes llama-server's flags.
type Spec struct {
	Model     string // GGUF model file (empty with Endpoint)
	Projector string // vision projector GGUF for Model (--mmproj)
	Endpoint  string // an OpenAI-compatible server already running, instead of Model
	APIKey    string // for Endpoint
	Server    string // llama-server binary; "" finds it ($VISOR_LLAMA_SERVER, $PATH, the installed engine)
	Ctx       int    // context size in tokens; 0 is the model's own
	Slots     int    // llama-server slots (-np), one turn each
	Plan      string // "auto": placed by the VRAM plan, falling back mode by mode on out-of-memory; "off": as given
	GPU       string // what the plan is for: "auto", a device index, a size (24GiB) or a list of them
	KVType    string // KV cache type for K and V (-ctk/-ctv); "" is llama-server's f16
	FlashAttn string // flash attention (-fa): on, off or auto; "" is the plan's choice (on), or llama-server's (auto)
	ExtraArgs []string
	Env       []string // added to the environment of the llama-server visor starts
	Port      int      // the server's port on 127.0.0.1; 0 picks a free one
	// Warmup sends a small image and a long prompt after a GPU start, so the GPU compiles its kernels before the
	// first request needs them.
	Warmup bool
}

// Defaults is the Spec before any flag or file sets something: one slot, the plan for every GPU, warm-up on, and
// VISOR_SERVER_ARGS (settings a machine always wants, such as --poll 0 where many servers share few cores).
func Defaults() Spec {
	return Spec{Slots: 1, Plan: "auto", GPU: "auto", Warmup: true, ExtraArgs: EnvServerArgs()}
}

// EnvServerArgs are VISOR_SERVER_ARGS: arguments for every llama-server visor starts, before those of a flag, an
// agent file, the config file or a gateway model.
func EnvServerArgs() []string { return strings.Fields(os.Getenv("VISOR_SERVER_ARGS")) }

// KVTypes are the cache types llama-server accepts (-ctk/-ctv).
var KVTypes = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}

// Validate checks every value before anything starts, naming the flag and the fix. It reads the model's header
// and looks for the binary, nothing more.
func (s Spec) Validate() error { return s.ValidateFrom("") }

// ValidateFrom is Validate for a model that origin named ("the default model "qwen" of config.yaml") rather
// than --model: a missing file is reported with the origin, not a flag the user never typed.
func (s Spec) ValidateFrom(origin string) error {
	var errs []error
	modelFlag, mmprojFlag, fix := "--model", "--mmproj", ""
	if origin != "" {
		modelFlag, mmprojFlag = origin+": path", origin+": mmproj"
		fix = ", or name another model with --model NAME (`visor demo` runs without a model of your own)"
	}
	switch {
	case s.Endpoint != "" && s.Model != "":
		errs = append(errs, errors.New("--model and --endpoint both given: use --model to start llama-server, or --endpoint for a server already running"))
	case s.Endpoint == "" && s.Model == "":
		errs = append(errs, errors.New("no model: pass --model FILE.gguf (with --mmproj FILE.gguf for images) or --endpoint URL; `visor demo` runs without a model of your own"))
	}
	if s.Model != "" {
		if err := checkFile(modelFlag, s.Model, "the path of a GGUF model file"+fix); err != nil {
			errs = append(errs, err)
		} else if err := checkModel(modelFlag, s.Model, s.Ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Projector != "" {
		if s.Endpoint != "" {
			errs = append(errs, errors.New("--mmproj with --endpoint: the running server has its own projector; drop --mmproj"))
		} else if err := checkFile(mmprojFlag, s.Projector, "the path of the model's vision projector GGUF (mmproj-*.gguf)"+fix); err != nil {
			errs = append(errs, err)
		} else if err := checkProjector(mmprojFlag, s.Projector); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Endpoint != "" {
		if !strings.HasPrefix(s.Endpoint, "http://") && !strings.HasPrefix(s.Endpoint, "https://") {
			errs = append(errs, fmt.Errorf("--endpoint %s: give an http:// or https:// URL such as http://127.0.0.1:8080", engine.RedactURL(s.Endpoint)))
		}
	} else if _, err := llamacpp.Find(s.Server); err != nil {
		errs = append(errs, err) // it names the server's origin (--server, VISOR_LLAMA_SERVER) or where it looked
	}
	if s.Ctx < 0 {
		errs = append(errs, fmt.Errorf("--ctx %d: give a context size in tokens, or 0 for the model's default", s.Ctx))
	}
	if s.Slots < 1 {
		errs = append(errs, fmt.Errorf("--parallel %d: give 1 or more slots", s.Slots))
	}
	if s.Plan != "auto" && s.Plan != "off" {
		errs = append(errs, fmt.Errorf("--plan %q: use auto or off", s.Plan))
	}
	if s.FlashAttn != "" && !contains([]string{"on", "off", "auto"}, s.FlashAttn) {
		errs = append(errs, fmt.Errorf("--flash-attn %q: use on, off or auto", s.FlashAttn))
	}
	if s.Endpoint == "" {
		if err := llamacpp.CheckExtraArgs(s.ExtraArgs); err != nil {
			errs = append(errs, err)
		}
	}
	if s.KVType != "" && !contains(KVTypes, s.KVType) {
		errs = append(errs, fmt.Errorf("--cache-type %q: use f16, q8_0 or q4_0 (or f32, bf16, q4_1, iq4_nl, q5_0, q5_1)", s.KVType))
	}
	return errors.Join(errs...)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Label is what stored sessions and status lines show as the engine: the model file's name, or the endpoint
// without its credentials.
func (s Spec) Label() string {
	if s.Model != "" {
		return filepath.Base(s.Model)
	}
	return engine.RedactURL(s.Endpoint)
}

// plainConfig is llama-server's configuration for the spec as given, without a plan.
func (s Spec) plainConfig(base llamacpp.Config) llamacpp.Config {
	base.Model, base.MMProj, base.Ctx, base.Parallel = s.Model, s.Projector, s.Ctx, s.Slots
	base.CacheTypeK, base.CacheTypeV = s.KVType, s.KVType
	if s.FlashAttn != "" {
		base.ExtraArgs = append([]string{"-fa", s.FlashAttn}, base.ExtraArgs...)
	}
	return base
}

// Key names the engine a spec starts: two specs with the same key start the same server, so a running one (a
// `visor serve` or gateway engine) can stand in for the other.
type Key struct {
	Model, Projector, Binary string // absolute paths
	Ctx, Slots               int
	Plan, GPU, KVType        string
	FlashAttn                string
	ExtraArgs                string
}

// Key is the spec's Key. Everything that changes what the server runs is in it: the files, the binary, the
// launch flags, the plan and what it plans for. A server started otherwise is never reused by mistake.
func (s Spec) Key() Key {
	abs := func(p string) string {
		if p == "" {
			return ""
		}
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	bin, _ := llamacpp.Find(s.Server)
	return Key{Model: abs(s.Model), Projector: abs(s.Projector), Binary: abs(bin), Ctx: s.Ctx, Slots: s.Slots,
		Plan: s.Plan, GPU: s.GPU, KVType: s.KVType, FlashAttn: s.FlashAttn, ExtraArgs: strings.Join(s.ExtraArgs, " ")}
}

// ID is the key as a short file name.
func (k Key) ID() string {
	fields := fmt.Sprintf("%s|%s|%d|%d|%s|%s|%s|%s|%s", k.Model, k.Projector, k.Ctx, k.Slots, k.ExtraArgs, k.KVType,
		k.Plan, k.GPU, k.Binary)
	if k.FlashAttn != "" { // added after the others, so the keys of engines started without it stay the same
		fields += "|-fa " + k.FlashAttn
	}
	h := sha256.Sum256([]byte(fields))
	return hex.EncodeToString(h[:8])
}

// checkModel reads the model's header (milliseconds, even for a big model): a file that is no GGUF model, or a
// context far past what the model was trained for (which llama-server would try to allocate for minutes before
// failing with std::bad_alloc), is refused at once.
func checkModel(flagName, path string, ctx int) error {
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("%s %s: not a GGUF model file (%w): give the path of a .gguf model", flagName, path, err)
	}
	if f.Arch() == projectorArch {
		// llama-server would load it for seconds and then say only "CLIP cannot be used as main model".
		return fmt.Errorf("%s %s: is a vision projector, not a chat model: pass it as --mmproj, with the chat model as --model", flagName, path)
	}
	train, ok := f.Uint(f.Arch() + ".context_length")
	if ok && train > 0 && ctx > 0 && uint64(ctx) > 4*train {
		return fmt.Errorf("--ctx %d: the model was trained for %d tokens; give at most %d (or 0 for the model's default)",
			ctx, train, 4*train)
	}
	return nil
}

// projectorArch is the general.architecture of llama.cpp's vision projectors (mmproj-*.gguf).
const projectorArch = "clip"

// checkProjector refuses a projector file that is no GGUF, or a chat model given as one, before llama-server
// loads the model for seconds and fails with "failed to read magic" or "Failed to load CLIP model".
func checkProjector(flagName, path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("%s %s: not a GGUF file (%w): give the model's vision projector (mmproj-*.gguf)", flagName, path, err)
	}
	if arch := f.Arch(); arch != projectorArch {
		return fmt.Errorf("%s %s: is a chat model (architecture %s), not a vision projector: give the model's mmproj-*.gguf (a chat model goes in --model)", flagName, path, arch)
	}
	return nil
}

// checkFile refuses a missing file, a folder, or a FIFO or device (which would block the load) at once.
func checkFile(flagName, path, what string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %s: no such file: give %s", flagName, path, what)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flagName, path, err)
	case st.IsDir():
		return fmt.Errorf("%s %s: is a folder: give %s", flagName, path, what)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s %s: not a regular file (%s): give %s", flagName, path, st.Mode().Type(), what)
	}
	return nil
}
