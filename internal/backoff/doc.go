// Package backoff is the one schedule of waits every retry loop of tend
// uses: the agent after failed ticks, the supervisor between restarts of a
// crashing service, the status reporter after a refused post, and the Git
// and blob fetches between attempts. It is support for those stages, not a
// stage of the flow.
package backoff
