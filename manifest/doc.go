// Package manifest parses and validates what tend reads: the Device
// documents in the fleet repo and the agent's own AgentConfig.
//
// It is the second step of the flow in DESIGN.md (gitsource → manifest →
// planner): it turns the files fetched for one device into one merged,
// validated Device, strictly (an unknown field is an error) and with errors
// that name the file, the line and the field path (spec.files[1].path).
package manifest
