package term

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxPromptBytes bounds a prompt read from stdin: more than any context holds, less than a mistaken pipe of a
// disk image.
const maxPromptBytes = 8 << 20

// ReadPrompt reads a question from standard input. A pipe that never ends (a writer that hangs) must not keep
// a Ctrl-C or SIGTERM from stopping visor: the read runs aside, and a canceled ctx returns at once. The goroutine
// ends with the process, which is about to exit.
func ReadPrompt(ctx context.Context, stdin io.Reader) (string, error) {
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(stdin, maxPromptBytes+1))
		done <- read{b, err}
	}()
	var b []byte
	var err error
	select {
	case r := <-done:
		b, err = r.b, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("ask: stopped while reading the question from standard input: %w", context.Cause(ctx))
	}
	if err != nil {
		return "", fmt.Errorf("ask: read the question from standard input: %w", err)
	}
	if len(b) > maxPromptBytes {
		return "", fmt.Errorf("ask: standard input holds more than %d MiB: pass a shorter question, or a file to a tool (--tools read_file)", maxPromptBytes>>20)
	}
	q := strings.TrimSpace(string(b))
	if q == "" {
		return "", ErrNoPrompt
	}
	return q, nil
}

// ErrNoPrompt: standard input held no question.
var ErrNoPrompt = errors.New(`ask: no question: standard input was empty; visor ask "your question"`)
