package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/visorhq/visor/frontend/term"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/demo"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools/toolset"
)

// cmdModels writes visor's tiny generated models, for tests and for trying visor without a model.
func cmdModels(args []string, stdout, stderr io.Writer) error {
	const usage = "usage: visor models write DIR   (writes the tiny chat model and its vision projector into DIR)\n"
	if len(args) > 0 && isHelp(args[len(args)-1]) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if len(args) != 2 || args[0] != "write" {
		fmt.Fprint(stderr, usage)
		return &usageError{Msg: "models: expected: models write DIR"}
	}
	dir := args[1]
	if strings.HasPrefix(dir, "-") {
		return &usageError{Msg: fmt.Sprintf("models write: %q looks like a flag, not a folder: visor models write DIR", dir)}
	}
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n%s\n", chat, proj)
	return nil
}

// cmdDemo runs a small agent on the tiny generated model against a real llama-server: the model lists a demo
// folder with the list_dir tool, reads the result and answers. It shows the whole loop working without a model
// download; with --model it runs the same demo on a real model.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var ef launch.Spec
	registerEngine(fs, &ef)
	question := fs.String("q", "What files are in the workspace?", "the question to ask")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tiny := ef.Model == "" && ef.Endpoint == ""
	if tiny {
		chat, proj, err := testmodel.Files(filepath.Join(filepath.Dir(llamacpp.InstallDir()), "models"))
		if err != nil {
			return err
		}
		ef.Model, ef.Projector = chat, proj
		fmt.Fprintf(stderr, "demo: no --model given; using visor's tiny generated model %s\n", chat)
	}
	ws, err := demo.Workspace()
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	t := turn{engine: ef, toolFlags: toolFlags{Options: toolset.Options{Names: []string{"list_dir"}, Workspace: ws}, format: "hermes"}, noStore: true,
		agentName: "demo", question: *question, agentOptions: agentOptions{maxSteps: 4}}
	a, err := openApp(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer a.close()
	sess, err := a.svc.Open(ctx, session.OpenOptions{Title: *question})
	if err != nil {
		return err
	}
	defer sess.Close()
	fmt.Fprintf(stderr, "demo: workspace %s\n", ws)
	fmt.Fprintf(stdout, "> %s\n", *question)
	err = term.Ask(ctx, sess, *question, nil, stdout, stderr, term.Show{}) // stores nothing: no "continue with"
	if err == nil && tiny {
		fmt.Fprint(stderr, demo.Explained)
	}
	return err
}
