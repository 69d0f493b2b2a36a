package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/visorhq/visor/config"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/httpguard"
	"github.com/visorhq/visor/internal/safefile"
	"github.com/visorhq/visor/internal/userpath"
	"github.com/visorhq/visor/session"
)

// cmdGateway is `visor gateway`: one OpenAI-compatible endpoint on a fixed address for any agent, with the
// models of a config file (or one --model) started by the plan, swapped on demand and unloaded when idle. It is
// a command of its own rather than a mode of `visor serve`, which keeps one engine on a random port for other
// visor commands; the gateway's engines are advertised the same way, so those commands reuse them too.
func cmdGateway(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	if len(args) > 0 && (args[0] == "running" || args[0] == "load" || args[0] == "unload") {
		return cmdGatewayAdmin(ctx, args[0], args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var ef launch.Spec
	registerEngine(fs, &ef)
	config := fs.String("config", "", "YAML file naming the models (see README: The gateway)")
	name := fs.String("name", "", "model name clients use for --model or --endpoint (default: the file's base name)")
	addr := fs.String("addr", "", "address to serve on (default 127.0.0.1:8080): loopback, or any with "+serveKeyEnv+" set")
	store := fs.Bool("store", false, "store the traffic as sessions (searchable with visor sessions search)")
	db := fs.String("db", "", "conversation database for --store (default ~/.local/share/visor/visor.db)")
	idle := fs.Duration("idle-unload", 0, "unload a model nobody used for this long (0: the config's, else never)")
	var cors listFlag
	fs.Var(&cors, "cors-origin", "an origin (scheme://host[:port]) whose browser pages may call the gateway (repeatable; none by default)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fc, err := gatewayConfig(*config, *name, ef)
	if err != nil {
		return err
	}
	if *addr == "" {
		*addr = fc.Addr
	}
	if *addr == "" {
		*addr = "127.0.0.1:8080"
	}
	key := os.Getenv(serveKeyEnv)
	if err := httpguard.CheckListen("gateway", *addr, key, serveKeyHint); err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	if err := fc.CheckPorts(*addr); err != nil {
		return err
	}
	if *idle == 0 {
		*idle = time.Duration(fc.IdleUnload)
	}
	cfg := gateway.Config{APIKey: key, KeyHint: serveKeyHint, MaxQueue: fc.MaxQueue,
		QueueTimeout: time.Duration(fc.QueueTimeout), IdleUnload: *idle, Logger: logger, VRAM: nvmlVRAM(ctx),
		AllowedOrigins: append(fc.CORSOrigins, cors...)}
	for _, n := range sortedKeys(fc.Models) {
		m, err := gatewayModel(n, fc.Models[n], ef, stderr, logger)
		if err != nil {
			return err
		}
		cfg.Models = append(cfg.Models, m)
	}
	if *store {
		st, err := openStore(ctx, *db)
		if err != nil {
			return err
		}
		defer st.Close()
		rec := session.NewClientRecorder(st, logger)
		defer rec.Close()
		cfg.Recorder = rec
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		return err
	}
	defer gw.Close(context.Background())
	for _, n := range fc.Preload {
		if err := gw.Preload(ctx, n); err != nil {
			return err
		}
	}
	return gw.ListenAndServe(ctx, *addr, func(a net.Addr) {
		names := make([]string, len(cfg.Models))
		for i, m := range cfg.Models {
			names[i] = m.Name
		}
		fmt.Fprintf(stdout, "OpenAI-compatible endpoint at http://%s/v1 serving %s (Ctrl-C stops it)\n", a, strings.Join(names, ", "))
	})
}

// gatewayConfig reads --config, or makes a one-model config from the engine flags.
func gatewayConfig(path, name string, ef launch.Spec) (gateway.FileConfig, error) {
	if path != "" {
		if ef.Model != "" || ef.Endpoint != "" {
			return gateway.FileConfig{}, errors.New("--config and --model/--endpoint both given: name the models in the config file, or pass one --model")
		}
		b, err := safefile.ReadFile(path, 1<<20)
		if err != nil {
			return gateway.FileConfig{}, fmt.Errorf("--config: %w", err)
		}
		return gateway.ParseConfig(path, b)
	}
	if ef.Model == "" && ef.Endpoint == "" {
		return gateway.FileConfig{}, errors.New("no models: pass --config models.yaml, or --model FILE.gguf [--mmproj P.gguf], or --endpoint URL")
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(ef.Model), ".gguf")
		if ef.Endpoint != "" {
			name = "remote"
		}
	}
	mc := gateway.ModelConfig{Model: ef.Model, MMProj: ef.Projector, Ctx: ef.Ctx, Parallel: ef.Slots, Args: ef.ExtraArgs,
		Endpoint: ef.Endpoint}
	if ef.Endpoint != "" {
		mc.Parallel, mc.APIKey = 0, ef.APIKey
	}
	// One model is loaded at start, as `visor web` does: a model that cannot load fails now.
	return gateway.FileConfig{Models: map[string]gateway.ModelConfig{name: mc}, Preload: []string{name}}, nil
}

// gatewayModel turns one config entry into a gateway model whose engine is a conductor over visor's launcher
// (the VRAM plan, a `visor serve` engine reused, or the remote endpoint).
func gatewayModel(name string, mc gateway.ModelConfig, base launch.Spec, stderr io.Writer, logger *slog.Logger) (gateway.Model, error) {
	ef := base
	ef.Projector, ef.APIKey = "", ""
	config.ApplyModel(&ef, config.Model{Path: userpath.Expand(mc.Model), MMProj: userpath.Expand(mc.MMProj),
		Endpoint: mc.Endpoint, APIKeyEnv: mc.APIKeyEnv, Ctx: mc.Ctx, Parallel: max(mc.Parallel, 1), ServerArgs: mc.Args},
		config.Set{})
	if mc.APIKeyEnv == "" && mc.APIKey != "" {
		ef.APIKey = mc.APIKey
	}
	if mc.Embeddings {
		ef.ExtraArgs = append(append([]string(nil), ef.ExtraArgs...), "--embeddings")
		// A chat model's own pooling is often none, which llama-server's /v1/embeddings refuses.
		if !hasArg(ef.ExtraArgs, "--pooling") {
			ef.ExtraArgs = append(ef.ExtraArgs, "--pooling", "mean")
		}
	}
	ef.Env, ef.Port = mc.Env, mc.Port
	if err := ef.Validate(); err != nil {
		return gateway.Model{}, fmt.Errorf("model %q: %w", name, err)
	}
	m := gateway.Model{Name: name, Group: mc.Group, Remote: mc.Endpoint != "", Slots: ef.Slots,
		UpstreamModel: mc.UpstreamModel, ToolFormat: mc.ToolFormat, ToolsAsText: mc.ToolsAsText, APIKey: ef.APIKey,
		Vision: ef.Projector != "", Embeddings: mc.Embeddings, Ctx: ef.Ctx, MTP: hasMTP(ef.ExtraArgs), Aliases: mc.Aliases}
	if m.Remote {
		m.Slots = 64 // the remote server queues for itself
	} else if ef.Projector != "" && ef.Slots > 1 {
		// One slot is kept for requests that wait: their images are evaluated there ahead of their turn.
		m.Slots, m.ServerSlots = ef.Slots-1, ef.Slots
	}
	m.Open = func() gateway.Engine {
		// The gateway unloads and swaps its engines, which it cannot do to another process's: it reuses none, and
		// advertises its own (unless another live engine for the same model is advertised already).
		l := launch.New(ef, launch.Options{Out: stderr, Logger: logger, Advertise: true})
		cfg := conductor.Config{Logger: logger}
		l.Configure(&cfg)
		return closer{conductor.New(cfg), l.Close}
	}
	return m, nil
}

func hasArg(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// hasMTP reports whether llama-server's arguments turn on MTP speculation.
func hasMTP(args []string) bool {
	for i, a := range args {
		if a == "--spec-type=draft-mtp" || a == "--spec-type" && i+1 < len(args) && args[i+1] == "draft-mtp" {
			return true
		}
	}
	return false
}

// closer removes the engine's advertisement once it is stopped.
type closer struct {
	*conductor.Conductor
	after func()
}

func (c closer) Close(ctx context.Context) error {
	err := c.Conductor.Close(ctx)
	c.after()
	return err
}

// nvmlVRAM reads the first GPU's memory for /metrics, or nil without NVML.
func nvmlVRAM(ctx context.Context) gateway.VRAM {
	if _, err := (vram.NVML{}).GPUs(ctx); err != nil {
		return nil
	}
	return func() (uint64, uint64, bool) {
		gpus, err := (vram.NVML{}).GPUs(context.Background())
		if err != nil || len(gpus) == 0 {
			return 0, 0, false
		}
		var used, total uint64
		for _, g := range gpus {
			used += g.Total - g.Free
			total += g.Total
		}
		return used, total, true
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
