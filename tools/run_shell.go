package tools

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

//go:embed run_shell.md
var runShellDescription string

const (
	shellDefaultTimeout = 60 * time.Second
	shellMaxStream      = 24 << 10 // per stream, so stderr survives a chatty stdout
)

type runShellIn struct {
	Command string `json:"command" jsonschema_description:"Command line, e.g. go test ./... (no pipes or redirection)."`
	Dir     string `json:"dir,omitempty" jsonschema:"default=." jsonschema_description:"Working directory, relative to the workspace root."`
}

// shellConfig is what one run_shell call needs from BuiltinConfig.
type shellConfig struct {
	root           string
	listed         []string // Shell as the user gave it
	allow          []string // every name that may run: Shell (launchers only if also in ShellLaunchers) and ShellLaunchers
	launchers      []string
	allowProtected []string
	env            []string
	timeout        time.Duration
}

func runShellTool(cfg BuiltinConfig) Tool {
	sc := shellConfig{root: cfg.Root, allowProtected: cfg.AllowProtected, env: cfg.ShellEnv, timeout: cfg.ShellTimeout}
	for _, n := range cfg.ShellLaunchers {
		sc.launchers = append(sc.launchers, strings.TrimSpace(n))
	}
	for _, n := range cfg.Shell {
		sc.listed = append(sc.listed, strings.TrimSpace(n))
	}
	for _, n := range append(slices.Clone(sc.listed), sc.launchers...) {
		if _, launcher := launchers[n]; n != "" && (!launcher || slices.Contains(sc.launchers, n)) {
			sc.allow = append(sc.allow, n)
		}
	}
	slices.Sort(sc.allow)
	sc.allow = slices.Compact(sc.allow)
	if sc.timeout <= 0 {
		sc.timeout = shellDefaultTimeout
	}
	desc := fmt.Sprintf(describe(runShellDescription), strings.Join(sc.allow, ", "))
	// The Registry's timeout is a backstop only: the tool's own deadline fires first and still returns the
	// output captured so far.
	return New(RunShellName, desc, func(ctx context.Context, in runShellIn) (string, error) {
		return runShell(ctx, sc, in)
	}, WithTimeout(sc.timeout+10*time.Second))
}

func runShell(ctx context.Context, sc shellConfig, in runShellIn) (string, error) {
	timeout := sc.timeout
	argv, err := splitCommand(in.Command)
	if err != nil {
		return "", err
	}
	if len(argv) == 0 {
		return "", errors.New("command is empty")
	}
	// A name with a slash could point at any binary; only bare names looked up in PATH are allowlisted.
	if strings.ContainsRune(argv[0], '/') || !slices.Contains(sc.allow, argv[0]) {
		if _, launcher := launchers[argv[0]]; launcher && slices.Contains(sc.listed, argv[0]) {
			if err := checkProgram(argv, sc.launchers); err != nil {
				return "", err
			}
		}
		return "", fmt.Errorf("command %q is not allowed; allowed commands: %s", argv[0], strings.Join(sc.allow, ", "))
	}
	if err := checkProgram(argv, sc.launchers); err != nil {
		return "", err
	}
	w, err := newWorkspace(sc.root)
	if err != nil {
		return "", err
	}
	rel, err := w.rel(in.Dir)
	if err != nil {
		return "", err
	}
	if name, why, ok := protectedIn(rel, sc.allowProtected); ok {
		return "", fmt.Errorf("dir %q is inside %s (%s), which is protected: run commands elsewhere", in.Dir, name, why)
	}
	if err := refuseGitShape(fmt.Sprintf("dir %q", in.Dir), rel, sc.allowProtected, w.exists); err != nil {
		return "", fmt.Errorf("%w: %w", errShellPolicy, err)
	}
	dir := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := w.checkArgs(dir, argv[1:], sc.allowProtected); err != nil {
		return "", err
	}
	path := cleanPATH(os.Getenv("PATH"), w)
	bin, err := lookPath(argv[0], path, w)
	if err != nil {
		return "", fmt.Errorf("command %q is allowed but not installed: %w", argv[0], err)
	}

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, argv[1:]...)
	cmd.Dir = dir
	cmd.Env = shellEnv(os.Environ(), sc.env, path, dir)
	var stdout, stderr cappedBuffer
	stdout.max, stderr.max = shellMaxStream, shellMaxStream
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setProcessGroup(cmd)
	// Without WaitDelay a grandchild holding the pipes open would keep Wait blocked after the kill.
	cmd.WaitDelay = 2 * time.Second

	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start).Round(time.Millisecond)

	var b strings.Builder
	var exitErr *exec.ExitError
	switch {
	case cctx.Err() != nil && ctx.Err() == nil:
		fmt.Fprintf(&b, "Command killed after timeout of %s.\n", timeout)
	case ctx.Err() != nil:
		fmt.Fprintf(&b, "Command canceled: %v.\n", context.Cause(ctx))
	case errors.As(err, &exitErr) && exitErr.Exited():
		fmt.Fprintf(&b, "Exit code: %d (%s)\n", exitErr.ExitCode(), elapsed)
	case errors.As(err, &exitErr):
		fmt.Fprintf(&b, "Terminated: %v (%s)\n", exitErr, elapsed)
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		return "", fmt.Errorf("run %s: %w", argv[0], err)
	default:
		fmt.Fprintf(&b, "Exit code: 0 (%s)\n", elapsed)
	}
	fmt.Fprintf(&b, "--- stdout ---\n%s", stdout.String())
	fmt.Fprintf(&b, "--- stderr ---\n%s", stderr.String())
	if cctx.Err() != nil {
		return "", errors.New(b.String())
	}
	return b.String(), nil
}

// cappedBuffer keeps the first max bytes written and counts the rest, so a runaway command cannot fill
// memory and the model still learns how much it missed.
type cappedBuffer struct {
	buf   bytes.Buffer
	max   int
	total int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.total += len(p)
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	s := c.buf.String()
	if c.total > c.buf.Len() {
		s = dropPartialRune(s)
		s += fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", len(s), c.total)
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// splitCommand splits a command line into words with shell quoting rules, and refuses the operators a
// shell would interpret so the model learns they do nothing here instead of seeing them passed as arguments.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote in command")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				} else if s[i] == '$' || s[i] == '`' {
					return nil, fmt.Errorf("%q inside double quotes would need a shell; quote it with single quotes", s[i])
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote in command")
			}
			inWord = true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
				inWord = true
			}
		case strings.IndexByte("|&;<>()$`*?[]{}~\n", c) >= 0:
			return nil, fmt.Errorf("%q is shell syntax, and commands run without a shell; run one command at a time, quoting arguments that contain it", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// dropPartialRune removes a multi-byte character cut in half at the end of s.
func dropPartialRune(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			break
		}
	}
	return s
}
