// Package api is the wire between a device and the hub: what both sides
// write and read and must mean the same to both. The status document
// (Status, GET /status and the report an agent posts, versioned by
// FormatVersion), the release key a device reports and a rollout's
// brakes are asked about, the brakes' query and its verdict
// (VerdictQuery, Verdict: GET /v1/verdict), and the hub's JSON answers
// that tend fleet reads (DeviceList, DeviceDetail, ReleaseList,
// ReleaseDetail). It imports the standard library only, so that the
// agent that writes these documents, the hub that reads them and
// hubclient depend on it and not on each other.
package api
