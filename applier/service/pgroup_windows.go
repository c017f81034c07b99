package service

import "os/exec"

// ownProcessGroup leaves cmd as it is: Windows has no process groups to
// kill, and its context's end kills the process itself. No service runs
// there (tend's node commands need Linux).
func ownProcessGroup(*exec.Cmd) {}
