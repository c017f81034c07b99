// Package hub is the fleet's ledger and window (tend-hub): it takes the
// status documents agents post to report.url, one device per bearer
// token, keeps each device's latest state and the release events derived
// from successive reports in SQLite or PostgreSQL, and serves them as JSON
// (/v1/devices, /v1/releases), as a server-rendered page, and as
// Prometheus metrics. The documents it reads and the answers it writes
// are package api's; it links no package that acts on a node, and tend
// fleet reads it through hubclient. It stands beside the flow of
// DESIGN.md, after status: devices decide for themselves and work the
// same while it is down.
package hub
