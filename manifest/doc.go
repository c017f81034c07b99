// Package manifest parses and validates what tend reads: the documents of
// the fleet repo (Device, Profile, Rollout) and the agent's own
// AgentConfig.
//
// It is the step after the source in DESIGN.md's flow (source → manifest
// → render → rollout → observe → planner → applier → status): Compose
// turns the files fetched for one device into one merged, validated
// Device, strictly (an unknown field is an error) and with errors that
// name the file, the line and the field path (spec.files[1].path). Its
// document types are the vocabulary the later stages read.
package manifest
