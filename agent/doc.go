// Package agent runs reconciles: one tick is the ordered steps of DESIGN.md's
// flow (fetch, render, decide, observe, plan, apply, report), stopping at
// the first error so the node keeps its last good state. Decide is one
// call to package gating, which says whether the tick takes the rendered
// target, holds the applied revision (the device's Rollout, its brakes,
// its gate or a service's update lock hold the release), or stages the
// release first; the tick then reads the applied revision instead when it
// holds, and tells its Stager what to download, before the node is
// observed, once. Run repeats ticks on a schedule with jitter, and hands
// what each did to package status.
//
// The CLI's plan and apply call the same Reconciler as the daemon, so what
// `tend plan` prints is what the agent will do.
package agent
