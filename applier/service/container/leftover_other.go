//go:build !linux

package container

// killInvocation does nothing off Linux: containers run on a Linux
// engine, and a task it lost is not a process of this system.
func killInvocation(string) {}
