// Package service runs and stops service processes: the exec runtime that
// the applier's service driver and supervisor call to start each replica of
// a service detached in its own session, identify it across agent restarts
// by (pid, start time), wait for it (as a child, or through a pidfd once
// adopted), stop its whole process group, confine it to memory and CPU limits
// through cgroups (v2, or v1 where that is what the node mounts), rotate the
// log files it appends to, and probe its health. Runtime is the seam a
// container runtime can implement instead.
package service
