package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/internal/safefile"
)

// cmdToolcalls is `visor toolcalls parse`: raw model output in, the calls visor would find out, as one JSON
// object. Users debug their chat templates with it, so its output shape is stable.
func cmdToolcalls(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stdout, "usage: visor "+synopses["toolcalls parse"])
		return nil
	}
	if len(args) == 0 || args[0] != "parse" {
		fmt.Fprintln(stderr, "usage: visor toolcalls parse [--format auto|hermes|qwen-xml|gemma4|glm|mistral] [--tools tools.json] < output.txt")
		return errors.New("toolcalls: expected the subcommand parse")
	}
	fs := flag.NewFlagSet("toolcalls parse", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	format := fs.String("format", "auto", "call syntax: auto, hermes, qwen-xml, gemma4, glm or mistral")
	toolsFile := fs.String("tools", "", "OpenAI tools JSON to validate calls against")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	f, err := toolcall.ParseFormat(*format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	var ts *toolcall.ToolSet
	if *toolsFile != "" {
		b, err := safefile.ReadFile(*toolsFile, 16<<20) // a FIFO or /dev/zero is refused, not waited on
		if err != nil {
			return fmt.Errorf("--tools: %w", err)
		}
		if ts, err = toolcall.ParseTools(b); err != nil {
			return fmt.Errorf("--tools %s: %w", *toolsFile, err)
		}
	}
	return toolcall.WriteInspection(stdin, f, ts, stdout)
}
