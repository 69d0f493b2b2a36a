package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/config"
	"github.com/visorhq/visor/frontend/gateway"
)

// cmdValidate is `visor validate FILE…`: it checks agent files (and config files, by their name config.yaml)
// without starting anything, printing each problem as file:line:col: problem — fix.
func cmdValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return &usageError{Msg: "validate: no files: visor validate agent.yaml… (config.yaml files are checked as the config)"}
	}
	bad := 0
	for _, path := range fs.Args() {
		kind, err := config.Validate(path, func(path string, b []byte) error {
			_, err := gateway.ParseConfig(path, b)
			return err
		})
		if err != nil {
			bad++
			fmt.Fprintln(stdout, err)
			continue
		}
		fmt.Fprintf(stdout, "%s: ok%s\n", path, kind)
	}
	if bad > 0 {
		return fmt.Errorf("validate: %d of %d files have problems", bad, fs.NArg())
	}
	return nil
}

// cmdSchema is `visor schema agent|config`: the JSON Schema visor checks those files by.
func cmdSchema(args []string, stdout io.Writer) error {
	var b []byte
	var err error
	switch {
	case len(args) == 1 && isHelp(args[0]):
		_, err := fmt.Fprintln(stdout, "usage: visor schema agent|config   (the JSON Schema of agent files or of the config file)")
		return err
	case len(args) == 1 && args[0] == "agent":
		b, err = agentfile.Schema()
	case len(args) == 1 && args[0] == "config":
		b, err = config.Schema()
	default:
		return &usageError{Msg: "schema: say which: visor schema agent|config"}
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}
