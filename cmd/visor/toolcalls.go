package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/visorhq/visor/agent/toolcall"
)

// cmdToolcalls is `visor toolcalls parse`: raw model output in, the calls visor would find out, as one JSON
// object. Users debug their chat templates with it, so its output shape is stable.
func cmdToolcalls(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "parse" {
		fmt.Fprintln(stderr, "usage: visor toolcalls parse [--format auto|hermes|qwen-xml|gemma4|glm|mistral] [--tools tools.json] < output.txt")
		return errors.New("toolcalls: expected the subcommand parse")
	}
	fs := flag.NewFlagSet("toolcalls parse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "auto", "call syntax: auto, hermes, qwen-xml, gemma4, glm or mistral")
	toolsFile := fs.String("tools", "", "OpenAI tools JSON to validate calls against")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var toolsJSON []byte
	if *toolsFile != "" {
		b, err := os.ReadFile(*toolsFile)
		if err != nil {
			return fmt.Errorf("--tools: %w", err)
		}
		toolsJSON = b
	}
	return toolcall.RunParseCommand(stdin, stdout, *format, toolsJSON)
}
