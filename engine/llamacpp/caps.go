package llamacpp

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/visorhq/visor/engine"
)

// Flags is what a llama-server binary accepts, read from its --help.
type Flags struct {
	Binary    string          `json:"binary"`
	Version   string          `json:"version"`
	Names     map[string]bool `json:"names"` // every flag spelling, e.g. "--mmproj", "-mm", "--no-mmproj-offload"
	SpecTypes []string        `json:"spec_types"`
}

// Has reports whether the binary accepts flag (with its dashes).
func (f Flags) Has(flag string) bool { return f.Names[flag] }

// SupportsSpec reports whether --spec-type accepts kind (e.g. "draft-mtp").
func (f Flags) SupportsSpec(kind string) bool {
	for _, k := range f.SpecTypes {
		if k == kind {
			return true
		}
	}
	return false
}

// MMProjGPUSwap reports the fork's reactive MTP↔vision swap flag.
func (f Flags) MMProjGPUSwap() bool { return f.Has("--mmproj-gpu-swap") }

var (
	flagRE = regexp.MustCompile(`(?:^|[\s,])(--?[a-zA-Z][a-zA-Z0-9-]*)`)
	// The gap before a description: three or more spaces not following a comma (aliases are comma-aligned).
	descGapRE  = regexp.MustCompile(`[^,\s]\s{3,}`)
	specTypeRE = regexp.MustCompile(`--spec-type\s+([a-z0-9,_-]+)`)
)

// ParseHelp extracts flag names and --spec-type values from llama-server --help output.
func ParseHelp(help string) Flags {
	f := Flags{Names: map[string]bool{}}
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		// Flag names sit in the left column; descriptions start after a wide gap and mention other flags, which
		// must not count as supported spellings.
		left := line
		if loc := descGapRE.FindStringIndex(line); loc != nil {
			left = line[:loc[0]+1]
		}
		if !strings.HasPrefix(strings.TrimSpace(left), "-") {
			continue
		}
		for _, m := range flagRE.FindAllStringSubmatch(left, -1) {
			f.Names[m[1]] = true
		}
		if m := specTypeRE.FindStringSubmatch(line); m != nil {
			f.SpecTypes = strings.Split(m[1], ",")
		}
	}
	return f
}

// HelpCache reads each binary's --help once and keeps the result in memory and on disk, keyed by the binary's
// path, size and modification time, since running --help costs a process start on every visor invocation.
type HelpCache struct {
	Dir string // on-disk cache folder; empty keeps the cache in memory only

	mu  sync.Mutex
	mem map[string]Flags
}

// Flags returns the parsed --help of bin.
func (c *HelpCache) Flags(ctx context.Context, bin string) (Flags, error) {
	fi, err := os.Stat(bin)
	if err != nil {
		return Flags{}, fmt.Errorf("llama-server capabilities: %w", err)
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%d", bin, fi.Size(), fi.ModTime().UnixNano())))
	key := hex.EncodeToString(sum[:8])
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.mem[key]; ok {
		return f, nil
	}
	var path string
	if c.Dir != "" {
		path = filepath.Join(c.Dir, "help-"+key+".json")
		if b, err := os.ReadFile(path); err == nil {
			var f Flags
			if decodeJSON(b, &f) == nil && f.Names != nil {
				c.put(key, f)
				return f, nil
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil {
		return Flags{}, fmt.Errorf("llama-server capabilities: %s --help: %w: %.300s", bin, err, out)
	}
	f := ParseHelp(string(out))
	f.Binary = bin
	if v, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput(); err == nil {
		f.Version = strings.TrimSpace(lastLine(string(v)))
	}
	c.put(key, f)
	if path != "" {
		if b, err := jsonMarshal(f); err == nil && os.MkdirAll(c.Dir, 0o755) == nil {
			tmp := path + ".tmp"
			if os.WriteFile(tmp, b, 0o644) == nil {
				_ = os.Rename(tmp, path)
			}
		}
	}
	return f, nil
}

func (c *HelpCache) put(k string, f Flags) {
	if c.mem == nil {
		c.mem = map[string]Flags{}
	}
	c.mem[k] = f
}

func lastLine(s string) string {
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(l, "version:") {
			return l
		}
	}
	return s
}

// Props is what the running server says about itself (GET /props, /slots, /v1/models).
type Props struct {
	NCtx         int             `json:"n_ctx"`
	TotalSlots   int             `json:"total_slots"`
	ModelPath    string          `json:"model_path"`
	Build        string          `json:"build_info"`
	Vision       bool            `json:"vision"`
	Audio        bool            `json:"audio"`
	TemplateCaps map[string]bool `json:"chat_template_caps"`
	Slots        []Slot          `json:"slots"`
	Models       []string        `json:"models"`
}

// Slot is one entry of GET /slots.
type Slot struct {
	ID           int  `json:"id"`
	NCtx         int  `json:"n_ctx"`
	Speculative  bool `json:"speculative"`
	IsProcessing bool `json:"is_processing"`
}

// ToolsInTemplate reports whether the server's chat template renders tools itself; when false, llama-server
// silently ignores `tools` and visor must render the tool prompt and parse calls from text.
func (p Props) ToolsInTemplate() bool {
	return p.TemplateCaps["supports_tools"] && p.TemplateCaps["supports_tool_calls"]
}

// Speculating reports whether any slot has speculative decoding active (e.g. MTP). Builds that disable
// speculation when an mmproj is loaded show false here.
func (p Props) Speculating() bool {
	for _, s := range p.Slots {
		if s.Speculative {
			return true
		}
	}
	return false
}

// ReadProps queries /props, /slots and /v1/models. /slots may be disabled (--no-slots); that is not an error.
func ReadProps(ctx context.Context, c *engine.Client) (Props, error) {
	var raw struct {
		Default struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
		TotalSlots int    `json:"total_slots"`
		ModelPath  string `json:"model_path"`
		Build      string `json:"build_info"`
		Modalities struct {
			Vision bool `json:"vision"`
			Audio  bool `json:"audio"`
		} `json:"modalities"`
		Caps map[string]bool `json:"chat_template_caps"`
	}
	if err := c.Get(ctx, "/props", &raw); err != nil {
		return Props{}, fmt.Errorf("read server props: %w", err)
	}
	p := Props{NCtx: raw.Default.NCtx, TotalSlots: raw.TotalSlots, ModelPath: raw.ModelPath, Build: raw.Build,
		Vision: raw.Modalities.Vision, Audio: raw.Modalities.Audio, TemplateCaps: raw.Caps}
	_ = c.Get(ctx, "/slots", &p.Slots)
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := c.Get(ctx, "/v1/models", &models); err == nil {
		for _, m := range models.Data {
			p.Models = append(p.Models, m.ID)
		}
	}
	return p, nil
}

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", " ") }
