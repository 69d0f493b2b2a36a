//go:build !unix

package tools

import "os/exec"

// setProcessGroup is a no-op where process groups do not exist; only the direct child is killed.
func setProcessGroup(*exec.Cmd) {}
