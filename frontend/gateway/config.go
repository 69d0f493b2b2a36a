package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/visorhq/visor/agent/toolcall"
)

// FileConfig is the gateway's YAML config file:
//
//	addr: 127.0.0.1:8080        # optional; the --addr flag wins
//	idle_unload: 15m            # unload a model nobody asked for this long (0: never)
//	max_queue: 64               # requests waiting for a slot or a swap, beyond which 429
//	queue_timeout: 2m           # longest wait for a slot or a swap, then 503
//	preload: [qwen]             # load these at start, so a model that cannot load fails then
//	cors_origins: [http://localhost:3000]  # browser pages that may call the gateway (none by default)
//	models:
//	  qwen:
//	    model: ~/models/Qwen3.6-35B-A3B-Q4_K_M.gguf
//	    mmproj: ~/models/mmproj-Qwen3.6.gguf
//	    ctx: 65536
//	    parallel: 2             # llama-server slots; with mmproj one is kept for the images of requests that wait
//	    args: [--temp, "0.6"]
//	    group: small            # models of one group may stay loaded together
//	    aliases: [gpt-4o-mini]  # other names clients may use
//	    env: [GGML_VK_VISIBLE_DEVICES=0]  # added to the server's environment
//	    port: 8123              # the engine's own port on 127.0.0.1 (default: a free one)
//	    embeddings: false       # true starts it with --embeddings (and --pooling mean), for /v1/embeddings
//	    tool_format: qwen-xml   # the dialect calls are repaired from (default auto)
//	  big:
//	    endpoint: http://gpu-box:8000/v1
//	    api_key_env: BIG_KEY    # the variable holding its key (never the key itself)
//	    upstream_model: Qwen/Qwen3.6-235B
type FileConfig struct {
	Addr         string   `yaml:"addr"`
	IdleUnload   Duration `yaml:"idle_unload"`
	MaxQueue     int      `yaml:"max_queue"`
	QueueTimeout Duration `yaml:"queue_timeout"`
	Preload      []string `yaml:"preload"`
	// CORSOrigins are the origins (scheme://host[:port]) whose browser pages may call the gateway; none by default.
	CORSOrigins []string               `yaml:"cors_origins"`
	Models      map[string]ModelConfig `yaml:"models"`
}

// ModelConfig is one model name: a local GGUF started through the plan, or a remote endpoint.
type ModelConfig struct {
	Model    string   `yaml:"model"`
	MMProj   string   `yaml:"mmproj"`
	Ctx      int      `yaml:"ctx"`
	Parallel int      `yaml:"parallel"`
	Args     []string `yaml:"args"`
	Group    string   `yaml:"group"`
	// Aliases are other names clients may use for the model (gpt-4o-mini, an old name).
	Aliases []string `yaml:"aliases"`
	// Env is added to the environment of the model's llama-server (NAME=VALUE each).
	Env []string `yaml:"env"`
	// Embeddings starts the server with --embeddings, for /v1/embeddings.
	Embeddings bool `yaml:"embeddings"`
	// Port is the engine's fixed port on 127.0.0.1, for tools that talk to llama-server itself; 0 picks a free one.
	Port int `yaml:"port"`

	Endpoint      string `yaml:"endpoint"`
	APIKeyEnv     string `yaml:"api_key_env"`
	UpstreamModel string `yaml:"upstream_model"`

	// ToolFormat is the text dialect calls left in content are parsed as (auto, hermes, qwen-xml, …).
	ToolFormat string `yaml:"tool_format"`
	// APIKey is the endpoint's key given on the command line (--api-key); a file names a variable instead.
	APIKey string `yaml:"-"`

	// ToolsAsText renders the request's tools into the system prompt (in ToolFormat, hermes by default) and sends
	// no tools field, so the server sets no grammar and parses nothing; the gateway parses the calls. For servers
	// or templates whose own tool handling is broken.
	ToolsAsText bool `yaml:"tools_as_text"`
}

// Duration reads "90s", "15m" or "2h" from YAML.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration: write it as 90s, 15m or 2h", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)

// ParseConfig reads and checks a config file's bytes; path names the file in errors. Every problem is reported
// at once, each naming the model and the fix.
func ParseConfig(path string, data []byte) (FileConfig, error) {
	var fc FileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		if errors.Is(err, io.EOF) {
			return FileConfig{}, fmt.Errorf("%s is empty: name the models in it (models: {NAME: {model: FILE.gguf}})", path)
		}
		return FileConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	// A second document would be read by nothing: its models and addr would silently not apply.
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		line := next.Line
		if err != nil {
			return FileConfig{}, fmt.Errorf("%s: after the first document: %w", path, err)
		}
		return FileConfig{}, fmt.Errorf("%s: line %d: a second YAML document (after ---): the gateway reads one; merge it into the first", path, line)
	}
	var errs []error
	if len(fc.Models) == 0 {
		errs = append(errs, errors.New("no models: add a models: section naming at least one model (name: {model: FILE.gguf})"))
	}
	if fc.MaxQueue < 0 {
		errs = append(errs, fmt.Errorf("max_queue %d: give 0 (the default, 64) or more", fc.MaxQueue))
	}
	for _, name := range fc.Preload {
		if _, ok := fc.Models[name]; !ok {
			errs = append(errs, fmt.Errorf("preload: no model %q: name one of %s", name, strings.Join(sortedNames(fc.Models), ", ")))
		}
	}
	ports := map[int]string{}
	for _, name := range sortedNames(fc.Models) {
		m := fc.Models[name]
		where := fmt.Sprintf("model %q", name)
		if m.Port != 0 {
			switch other, taken := ports[m.Port]; {
			case m.Port < 0 || m.Port > 65535:
				errs = append(errs, fmt.Errorf("%s: port %d: give a port from 1 to 65535, or none for a free one", where, m.Port))
			case m.Endpoint != "":
				errs = append(errs, fmt.Errorf("%s: port is for a model visor starts; the endpoint has its own", where))
			case taken:
				errs = append(errs, fmt.Errorf("%s: port %d is also model %q's: give each model its own port", where, m.Port, other))
			default:
				ports[m.Port] = name
			}
		}
		if !nameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: a name is letters, digits and . _ : / @ + - (at most 128)", where))
		}
		switch {
		case m.Model != "" && m.Endpoint != "":
			errs = append(errs, fmt.Errorf("%s: both model and endpoint: give model (a GGUF to start) or endpoint (a running server)", where))
		case m.Model == "" && m.Endpoint == "":
			errs = append(errs, fmt.Errorf("%s: give model: FILE.gguf, or endpoint: URL of an OpenAI-compatible server", where))
		}
		if m.Endpoint != "" {
			u, err := url.Parse(m.Endpoint)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("%s: endpoint %q: give an http:// or https:// URL such as http://127.0.0.1:8000/v1", where, m.Endpoint))
			}
			if m.MMProj != "" || len(m.Args) > 0 || m.Ctx != 0 || m.Parallel != 0 {
				errs = append(errs, fmt.Errorf("%s: mmproj, args, ctx and parallel are for a model visor starts; the endpoint has its own", where))
			}
		}
		if m.APIKeyEnv != "" && os.Getenv(m.APIKeyEnv) == "" {
			errs = append(errs, fmt.Errorf("%s: api_key_env %s is not set: export %s=KEY first", where, m.APIKeyEnv, m.APIKeyEnv))
		}
		for _, a := range m.Aliases {
			if !nameRE.MatchString(a) {
				errs = append(errs, fmt.Errorf("%s: alias %q: a name is letters, digits and . _ : / @ + - (at most 128)", where, a))
			}
			if _, clash := fc.Models[a]; clash {
				errs = append(errs, fmt.Errorf("%s: alias %q is also a model's name: drop one", where, a))
			}
		}
		for _, kv := range m.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(k, " \t\n") {
				errs = append(errs, fmt.Errorf("%s: env %q: write NAME=VALUE", where, kv))
			}
		}
		if m.Endpoint != "" && (len(m.Env) > 0 || m.Embeddings) {
			errs = append(errs, fmt.Errorf("%s: env and embeddings are for a model visor starts; the endpoint has its own", where))
		}
		if m.Ctx < 0 || m.Parallel < 0 {
			errs = append(errs, fmt.Errorf("%s: ctx and parallel must not be negative", where))
		}
		if _, err := toolcall.ParseFormat(m.ToolFormat); err != nil {
			errs = append(errs, fmt.Errorf("%s: tool_format: %w", where, err))
		}
	}
	return fc, errors.Join(errs...)
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// CheckPorts refuses a model's fixed port that is the gateway's own (addr) or that something already listens on:
// an engine started there could not bind it, and the one answering there is not the model's. Checked at start,
// so the mistake is named before any load.
func (fc FileConfig) CheckPorts(addr string) error {
	own := 0
	if _, p, err := net.SplitHostPort(addr); err == nil {
		own, _ = strconv.Atoi(p)
	}
	var errs []error
	for _, name := range sortedNames(fc.Models) {
		port := fc.Models[name].Port
		if port == 0 {
			continue
		}
		if port == own {
			errs = append(errs, fmt.Errorf("model %q: port %d is the gateway's own (%s): give the model another port", name, port, addr))
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			errs = append(errs, fmt.Errorf("model %q: port %d on 127.0.0.1 is in use (%w): stop what listens there, or give the model another port", name, port, err))
			continue
		}
		_ = l.Close()
	}
	return errors.Join(errs...)
}
