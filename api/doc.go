// Package api holds the names that travel between a device and the hub
// and must mean the same to both: the release key a device reports and
// a rollout's brakes are asked about. It imports the standard library
// only, so the agent that writes these names and the hub that reads them
// depend on it and not on each other.
package api
