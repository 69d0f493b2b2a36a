package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/enginetest"
)

// visorExit runs this test binary as visor itself and returns its exit code, stdout and stderr.
func visorExit(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1", "VISOR_MODEL=", "VISOR_ENDPOINT=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func TestCommandLineConventions(t *testing.T) {
	if code, out, _ := visorExit(t, "", "--version"); code != 0 || !strings.HasPrefix(out, "visor ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"-h"}, {"ask", "-h"}, {"chat", "--help"}, {"run", "-h"}} {
		code, out, errOut := visorExit(t, "", args...)
		if code != 0 || !strings.Contains(out, "usage") || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", args, code, out, errOut)
		}
	}
	typos := []struct {
		args []string
		want string
	}{
		{[]string{"ask", "q", "--modle", "m.gguf"}, "did you mean --model?"},
		{[]string{"chat", "--mmprj", "p.gguf"}, "did you mean --mmproj?"},
		{[]string{"aks", "q"}, `did you mean "ask"?`},
	}
	for _, tc := range typos {
		code, out, errOut := visorExit(t, "", tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := visorExit(t, "", "ask", "--no-store"); code != 2 || !strings.Contains(errOut, "no question") {
		t.Errorf("ask with empty stdin: exit %d, %q", code, errOut)
	}
}

// TestAskReadsAPipedQuestion pipes the question to `visor ask` on the tiny model.
func TestAskReadsAPipedQuestion(t *testing.T) {
	enginetest.Binary(t)
	_, chat, _ := tinyWorkspace(t)
	code, out, errOut := visorExit(t, "What is here?\n", "ask", "--model", chat, "--no-store", "--plan", "off")
	if code != 0 || strings.TrimSpace(out) != "Hi!" {
		t.Fatalf("echo q | visor ask: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
}

func TestServerPhase(t *testing.T) {
	for line, want := range map[string]string{
		"0.00.019.574 I srv    load_model: loading model '/m/x.gguf'":              "load_model: loading model '/m/x.gguf'",
		"0.00.037.958 I srv  llama_server: model loaded":                           "llama_server: model loaded",
		"0.00.018.118 W srv  llama_server: security: no API key is set":            "",
		"0.00.135.084 I slot get_availabl: id  0 | task -1 | selected slot by LRU": "",
	} {
		got, ok := serverPhase(line)
		if got != want || ok != (want != "") {
			t.Errorf("serverPhase(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
}
