// Package schema holds the JSON Schema of every kind of document tend reads
// (Device, Profile, Rollout, AgentConfig), generated from manifest's Go
// types and committed here as <kind>.json, so that editors can complete
// and check manifests (`# yaml-language-server: $schema=…`) and `tend
// schema KIND` can print them. It is a top-level package because the
// files are for users of the repo, next to the examples, not part of the
// reconcile flow.
package schema
