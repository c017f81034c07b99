// Package docyaml finds the YAML examples of tend's documentation (the
// ```yaml blocks of README.md, DESIGN.md and examples/) and completes the
// ones marked as fragments into whole documents, so tests check every
// example with the real loader and the JSON Schema; it is test support,
// not part of tend's flow.
package docyaml
