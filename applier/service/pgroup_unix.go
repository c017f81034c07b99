//go:build unix

package service

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a process group of its own and has its
// context's end kill the whole group.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
