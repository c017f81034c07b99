// Package agent runs reconciles: one tick is the ordered steps of DESIGN.md's
// flow (fetch, render, decide, observe, plan, apply, report), stopping at
// the first error so the node keeps its last good state. Decide takes the
// rendered target or, when the device's Rollout or a service's update
// lock holds it, the applied revision, before the node is observed, once.
// Run repeats ticks on a schedule with jitter, and hands what each did to
// package status.
//
// The CLI's plan and apply call the same Reconciler as the daemon, so what
// `tend plan` prints is what the agent will do.
package agent
