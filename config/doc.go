// Package config loads the AgentConfig and builds what it names, for the
// agent and for every command that reads the fleet without acting on a
// node. Load, LoadCI and LoadNode read agent.yaml with the flags'
// Overrides as the agent, the CI commands (validate --all, diff, publish)
// and the commands on a node's state alone (status, retry, …) take it;
// the rest builds the registries' options, the verifier of signatures,
// the fleet repo's credentials and the fleet's source (a Git repo, or the
// repo published as an OCI artifact), with where each is kept in the
// stateDir. The agent builds its source here, and so do tend diff, tend
// publish and the hub's --fleet-source. It links no node's package (CI
// builds it for every platform): the drivers' options and the service
// runtimes are built by the agent.
package config
