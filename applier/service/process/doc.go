// Package process is the runtime of `command:` services (kind "process",
// registered with package service when imported): each replica starts
// detached in its own session, with exactly the environment it declares,
// as its user and group; its handle is (pid, start time), read from /proc,
// which identifies it across agent restarts; it is waited for as a child,
// or through a pidfd once adopted; stopping it stops its whole process
// group, its cgroup, and its descendants and session as /proc links them
// (a setsid child too); memory and CPU limits confine it through its own
// cgroup (v2, or v1 where that is what the node mounts); its output goes
// through a pipe to a log shim, tend's own binary in a hidden mode, which
// writes the log file and rotates it at the cap as it writes (see
// shimName). It is built on Linux only, where tend runs services.
package process
