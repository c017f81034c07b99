// Package config builds what an AgentConfig names, for every command
// that reads the fleet without acting on a node: the registries'
// options, the fleet repo's credentials and the fleet's source (a Git
// repo, or the repo published as an OCI artifact), with where each is
// kept in the stateDir. The agent builds its source here, and so do tend
// diff, tend publish and the hub's --fleet-source.
package config
