package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/config"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/frontend/term"
	"github.com/visorhq/visor/session"
)

// cmdRun is `visor run agent.yaml [prompt]`: the agent file gives the model, tools and limits; the command line
// gives the prompt (or the file's default prompt), images and the session.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var images listFlag
	var t turn
	fs.Var(&images, "image", "image file to attach (repeatable)")
	fs.StringVar(&t.db, "db", "", "conversation database (default ~/.local/share/visor/visor.db)")
	fs.StringVar(&t.session, "session", "", "continue this stored session (an id or a unique prefix)")
	fs.BoolVar(&t.noStore, "no-store", false, "do not store this conversation")
	var model, mmproj, endpoint string
	fs.StringVar(&model, "model", os.Getenv("VISOR_MODEL"), "run the agent on this GGUF file (or a model named in the config file) instead of the file's model (env VISOR_MODEL)")
	fs.StringVar(&mmproj, "mmproj", os.Getenv("VISOR_MMPROJ"), "vision projector for --model (env VISOR_MMPROJ)")
	fs.StringVar(&endpoint, "endpoint", "", "run the agent on a running OpenAI-compatible server instead (URL)")
	fs.StringVar(&t.configPath, "config", "", "config file (default $XDG_CONFIG_HOME/visor/config.yaml or ~/.config/visor/config.yaml)")
	t.registerExplain(fs) // applySpec leaves it
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New(`run: no agent file: visor run agent.yaml ["prompt"]`)
	}
	spec, err := config.LoadAgentFile(pos[0])
	if err != nil {
		return err
	}
	prompt := strings.Join(pos[1:], " ")
	if prompt == "" {
		prompt = spec.Prompt
	}
	if prompt == "" && len(spec.Steps) == 0 {
		return errors.New("run: no prompt: give one after the agent file, or set `prompt:` or `steps:` in " + spec.Path)
	}
	applySpec(&t, spec)
	t.fs, t.fromSpec = fs, true
	if model != "" || endpoint != "" {
		// The command line's model replaces the file's whole model section: its projector and context were
		// chosen for another model.
		t.engine = launch.Spec{Model: model, Projector: mmproj, Endpoint: endpoint, Slots: 1, Plan: "auto", GPU: "auto"}
	}
	t.question, t.images = prompt, images
	if prompt == "" {
		// The file's steps, in one session; --image files go with the first.
		t.question = spec.Steps[0].Prompt
		return runSteps(ctx, t, spec, stdout, stderr, logger)
	}
	return runTurn(ctx, t, stdout, stderr, logger)
}

// runSteps sends an agent file's steps one after another through the session service, which evaluates each
// next step's images ahead. Every image is read and checked before the engine starts.
func runSteps(ctx context.Context, t turn, spec agentfile.Spec, stdout, stderr io.Writer, logger *slog.Logger) error {
	a, err := openApp(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer a.close()
	steps := make([]session.Step, len(spec.Steps))
	for i, st := range spec.Steps {
		steps[i].Text = st.Prompt
		if i == 0 {
			for _, p := range t.images {
				im, err := a.readImage("--image "+p, p)
				if err != nil {
					return err
				}
				steps[i].Images = append(steps[i].Images, im)
			}
		}
		for _, p := range st.Images {
			im, err := a.readImage(fmt.Sprintf("%s: step %d: image %s", spec.Path, i+1, p), p)
			if err != nil {
				return err
			}
			steps[i].Images = append(steps[i].Images, im)
		}
	}
	sess, err := a.openSession(ctx, t.question)
	if err != nil {
		return err
	}
	defer sess.Close()
	return term.Steps(ctx, sess, steps, stdout, stderr, t.show())
}

// applySpec turns an agent file into the same settings `visor ask` takes from flags, so both paths run one code.
func applySpec(t *turn, s agentfile.Spec) {
	t.agentName = s.Name
	t.engine = launch.Defaults()
	config.ApplyModel(&t.engine, s.Model, config.Set{})
	t.toolFlags = toolFlags{Options: s.ToolOptions(), raw: s.ToolMode == "raw", format: s.ToolFormat}
	if t.toolFlags.format == "" {
		t.toolFlags.format = "hermes"
	}
	t.system, t.maxSteps, t.maxTokens, t.choice, t.temperature = s.System, s.MaxSteps, s.MaxTokens, s.ToolChoice, s.Temperature
	t.imageWindow = s.ImageWindow
	if t.maxSteps == 0 {
		t.maxSteps = 8
	}
}
