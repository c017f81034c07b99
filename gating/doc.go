// Package gating decides, for the agent's tick, whether the device takes
// the release its rendered target makes: the decide step between render
// and the observation of the node in DESIGN.md's flow (render → rollout →
// observe), as a device applies it. One call, Decider.Decide, says take,
// hold (why, and until when) or stage: the rollout's pause, wave and
// window (package rollout), then the brakes' hub (a device of a later
// wave asks it for its verdict), then the rollout's gate, then the update
// locks of the services the release would stop (probed with
// internal/flock), and, when the agent stages in the background, what its
// stager does with the release. It keeps when the device first saw a
// release and since when a lock holds it in stateDir, and, in the
// Decider, the hub and the gate that did not answer, left alone for a
// back-off. It reads the node (the inventory, the applied commit, the
// locks) and changes nothing on it: the agent holds the applied revision,
// stages and applies. Its own package, beside rollout (pure, shared with
// tend diff) and under agent: the decision a device makes reads the
// node and asks servers, and reads in one place.
package gating
