package mcp

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/internal/httpguard"
)

// maxFrameBytes bounds one message from a stdio server: the bound visor's own front ends use, which carries a
// 20 MiB screenshot in base64. The SDK's CommandTransport reads at most 16 MiB a line and then drops the
// connection, so a screenshot server's full-size image would read as a crash.
const maxFrameBytes = httpguard.MaxBodyBytes

// commandTransport starts a server's command and speaks MCP on its stdin and stdout as sdk.CommandTransport
// does (the same shutdown: close stdin, wait, SIGTERM, wait, SIGKILL), with maxFrameBytes as its line bound.
type commandTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration
}

func (t *commandTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	// The connection closes by closing the server's stdin, not its stdout.
	in := &serverInput{WriteCloser: stdin, cmd: t.cmd, terminate: t.terminate}
	return (&sdk.IOTransport{Reader: io.NopCloser(stdout), Writer: in, MaxLineLength: maxFrameBytes}).Connect(ctx)
}

// serverInput is the server's stdin; closing it ends the server, as the MCP spec's stdio shutdown says, and
// returns how it exited.
type serverInput struct {
	io.WriteCloser
	cmd       *exec.Cmd
	terminate time.Duration
}

func (s *serverInput) Close() error {
	if err := s.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing the server's stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(s.terminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return fmt.Errorf("the server process %d did not exit after SIGKILL", s.cmd.Process.Pid)
}
