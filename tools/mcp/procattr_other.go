//go:build !linux

package mcp

import "os/exec"

// setProcAttr does nothing here: only Linux can tie a child's life to its parent's; Close still ends it.
func setProcAttr(*exec.Cmd) {}
