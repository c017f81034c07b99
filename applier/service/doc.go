// Package service is the applier's driver for services: it starts each
// replica of a service through a Runtime, updates only the replicas whose
// spec changed, scales by the difference, checks that a started replica
// stays up and becomes healthy (or fails the action, which rolls the plan
// back), and stops what is no longer declared.
//
// The Supervisor keeps a record of every instance in stateDir, so that the
// next agent adopts what runs instead of restarting it; while the agent
// runs it restarts an instance that exits as its restart policy says, with
// crash-loop backoff, and restarts one whose health probe fails. The
// Runtime is the seam: the exec runtime in service/process runs processes,
// a container runtime can implement the same interface. Health probes and
// service log files live here, for every runtime.
package service
