package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server if visor dies without calling Close (SIGKILL, a crash), so no
// MCP server outlives the agent that started it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
