//go:build unix

package tools

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the command in its own process group and makes cancellation kill the whole group,
// so "make" cannot leave its compilers running after a timeout.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
