// Package status reports what the agent's ticks did, the last stage of
// DESIGN.md's flow: the tracker turns each tick into the status document
// (GET /status, `tend status`, the last-status file in stateDir, the
// report posted to a collector), and the metrics count ticks for
// Prometheus; the server answers /healthz, /status, /metrics and POST
// /reconcile. The document's types are package api's, which the hub
// reads too; this package names them for the agent. It is handed what a
// tick produced (Tick) and knows nothing of how ticks run.
package status
