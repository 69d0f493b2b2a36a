package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/internal/safefile"
	"github.com/visorhq/visor/internal/termtext"
)

// cmdToolcalls is `visor toolcalls parse`: raw model output in, the calls visor would find out, as one JSON
// object. Users debug their chat templates with it, so its output shape is stable.
func cmdToolcalls(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stdout, "usage: visor "+synopses["toolcalls parse"])
		return nil
	}
	if len(args) == 0 || args[0] != "parse" {
		return &usageError{Msg: "toolcalls: say parse: visor " + synopses["toolcalls parse"]}
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
	switch {
	case fs.NArg() > 1:
		return &usageError{Msg: fmt.Sprintf("toolcalls parse: one file of model output at most, not %q", fs.Args())}
	case fs.NArg() == 1: // the file the synopsis reads from stdin, given as an argument: read, not ignored
		b, err := safefile.ReadFile(fs.Arg(0), 16<<20)
		if err != nil {
			return fmt.Errorf("toolcalls parse: %w", err)
		}
		stdin = bytes.NewReader(b)
	case termtext.IsTerminal(stdin): // it would wait for input without a word
		fmt.Fprintln(stderr, "visor toolcalls parse: reading the model's output: paste it, then Ctrl-D (or give a file: < output.txt)")
	}
	return toolcall.WriteInspection(stdin, f, ts, stdout)
}
