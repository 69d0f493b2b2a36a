package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/visorhq/visor/engine/install"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
)

// cmdEngine shows which llama-server visor would run and what it supports; `engine install` installs it.
func cmdEngine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "install" {
		return cmdEngineInstall(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	server := fs.String("server", "", "llama-server binary to inspect")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		// `visor engine instal` printed the engine and said nothing of the word it ignored.
		return &usageError{Msg: fmt.Sprintf("engine: unknown argument %q: visor engine shows the engine, visor engine install [DIR] installs it", fs.Arg(0))}
	}
	return launch.Describe(ctx, *server, *asJSON, stdout)
}

// cmdEngineInstall runs the installer embedded in the binary, so a `go install`ed visor gets its engine too.
func cmdEngineInstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("engine install", flag.ContinueOnError)
	fs.SetOutput(stdout)
	gpu := fs.String("gpu", "", "GPU backend: auto (default), vulkan, cuda or off (VISOR_ENGINE_GPU)")
	force := fs.Bool("force", false, "reinstall even if a working engine is there (VISOR_ENGINE_FORCE)")
	debs := fs.String("debs", "", "install from the .deb files in this folder, offline (VISOR_ENGINE_DEBS)")
	usage := func() {
		fmt.Fprintf(stdout, "usage: visor engine install [flags] [DIR]\n\nInstalls Debian's llama-server into DIR "+
			"(default %s) without building anything.\n\nflags:\n", llamacpp.InstallDir())
		fs.PrintDefaults()
	}
	if err := parseFlagsUsage(fs, args, usage); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return &usageError{Msg: fmt.Sprintf("engine install takes at most one folder, got %q: usage: visor engine install [DIR]", fs.Args())}
	}
	return install.Run(ctx, install.Options{Dir: fs.Arg(0), GPU: *gpu, Debs: *debs, Force: *force, Stdout: stdout, Stderr: stderr, Command: "visor engine install"})
}
