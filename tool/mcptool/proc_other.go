//go:build !unix

package mcptool

import "os/exec"

func ownGroup(*exec.Cmd) {}

// signalGroup kills the process: without Unix process groups and
// signals, terminating and killing are the same.
func signalGroup(cmd *exec.Cmd, _ bool) { _ = cmd.Process.Kill() }
