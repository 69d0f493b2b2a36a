package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/visorhq/visor/config"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/httpguard"
	"github.com/visorhq/visor/session"
)

// cmdGateway is `visor gateway`: one OpenAI-compatible endpoint on a fixed address for any agent, with the
// models of a config file (or one --model) started by the plan, swapped on demand and unloaded when idle. It is
// a command of its own rather than a mode of `visor serve`, which keeps one engine on a random port for other
// visor commands; the gateway's engines are advertised the same way, so those commands reuse them too.
func cmdGateway(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	if len(args) > 0 && (args[0] == "running" || args[0] == "load" || args[0] == "unload") {
		verb, rest := args[0], args[1:]
		fs := flag.NewFlagSet("gateway "+verb, flag.ContinueOnError)
		fs.SetOutput(stdout) // -h prints the flags there; errors are returned
		base := fs.String("url", "http://127.0.0.1:8080", "the gateway's address (its key, if any, from "+serveKeyEnv+")")
		var pos []string // the name may come before the flags (visor gateway load qwen --url …)
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			pos, rest = rest[:1], rest[1:]
		}
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		return gateway.Admin(ctx, *base, os.Getenv(serveKeyEnv), verb, append(pos, fs.Args()...), stdout)
	}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var ef launch.Spec
	registerEngine(fs, &ef)
	file := fs.String("config", "", "YAML file naming the models (see README: The gateway)")
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
	fc, err := gateway.LoadConfig(*file, *name, gateway.ModelConfig{Model: ef.Model, MMProj: ef.Projector, Ctx: ef.Ctx,
		Parallel: ef.Slots, Args: ef.ExtraArgs, Endpoint: ef.Endpoint, APIKey: ef.APIKey})
	if err != nil {
		return err
	}
	*addr = cmp.Or(*addr, fc.Addr, "127.0.0.1:8080")
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
	streamIdle, err := streamIdle()
	if err != nil {
		return err
	}
	cfg := gateway.Config{APIKey: key, KeyHint: serveKeyHint, MaxQueue: fc.MaxQueue, StreamIdle: streamIdle,
		QueueTimeout: time.Duration(fc.QueueTimeout), IdleUnload: *idle, Logger: logger, VRAM: vram.NVMLUsage(ctx),
		AllowedOrigins: append(fc.CORSOrigins, cors...)}
	for _, n := range fc.Names() {
		mc := fc.Models[n]
		spec, err := config.GatewaySpec(n, ef, config.GatewayModel{Model: config.Model{Path: mc.Model, MMProj: mc.MMProj,
			Endpoint: mc.Endpoint, APIKeyEnv: mc.APIKeyEnv, Ctx: mc.Ctx, Parallel: mc.Parallel, ServerArgs: mc.Args},
			APIKey: mc.APIKey, Embeddings: mc.Embeddings, Env: mc.Env, Port: mc.Port})
		if err != nil {
			return err
		}
		facts := gateway.EngineFacts{Projector: spec.Projector != "", Ctx: spec.Ctx, Slots: spec.Slots, Args: spec.ExtraArgs, APIKey: spec.APIKey}
		// The gateway unloads and swaps its engines, which it cannot do to another process's: it reuses none, and
		// advertises its own (unless another live engine for the same model is advertised already).
		cfg.Models = append(cfg.Models, mc.Served(n, facts, func() gateway.Engine {
			return launch.NewConductor(spec, launch.Options{Out: stderr, Logger: logger, Advertise: true})
		}))
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
		fmt.Fprintf(stdout, "OpenAI-compatible endpoint at http://%s/v1 serving %s (Ctrl-C stops it)\n", a, strings.Join(fc.Names(), ", "))
	})
}
