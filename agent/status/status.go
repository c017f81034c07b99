package status

import (
	"time"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/drift"
)

// The status document is package api's, which the hub reads too; these
// names are the agent's for it.
type (
	Status          = api.Status
	ReportSeq       = api.ReportSeq
	Release         = api.Release
	ReleaseResource = api.ReleaseResource
	Staging         = api.Staging
	Quarantined     = api.Quarantined
	Notify          = api.Notify
	ResourceStatus  = api.ResourceStatus
	ServiceStatus   = api.ServiceStatus
	ReplicaStatus   = api.ReplicaStatus
	DriftRecord     = api.DriftRecord
)

// FormatVersion is the version of the status document: GET /status,
// `tend status --format json`, and what is posted to a collector.
const FormatVersion = api.FormatVersion

// Resource states in the status document.
const (
	StateOK      = api.ResourceOK
	StateDrifted = api.ResourceDrifted
	StatePending = api.ResourcePending
	StateFailed  = api.ResourceFailed
)

// Results of a tick in the status document that the counters do not
// name (see api.ResultSuspended, api.ResultHeld, api.ResultStaging).
const (
	ResultSuspended = api.ResultSuspended
	ResultHeld      = api.ResultHeld
	ResultStaging   = api.ResultStaging
)

// Bounds of the lists of a report (see api.MaxReportQuarantined).
const (
	MaxReportQuarantined = api.MaxReportQuarantined
	MaxReportResources   = api.MaxReportResources
)

// Replica states in the status document.
const (
	ReplicaRunning    = api.ReplicaRunning
	ReplicaRestarting = api.ReplicaRestarting
	ReplicaExited     = api.ReplicaExited
	ReplicaNotStarted = api.ReplicaNotStarted
)

// driftRecords are the drift tracker's records as the status document
// writes them; nil stays nil (null, where [] is an empty list).
func driftRecords(rs []drift.Record) []DriftRecord {
	if rs == nil {
		return nil
	}
	out := make([]DriftRecord, len(rs))
	for i, r := range rs {
		out[i] = DriftRecord{Time: r.Time, Resource: r.Resource, Kind: r.Kind, Reason: r.Reason, Revision: r.Revision, Reverted: r.Reverted}
	}
	return out
}

// RFC3339 formats t for the status document, "" for the zero time.
func RFC3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
