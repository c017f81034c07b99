package hub

import "github.com/tend-dev/tend/api"

// The hub's JSON answers, their states and the brakes' verdict are
// package api's, which tend fleet and the agent read without linking the
// hub; these are the hub's names for them.
type (
	Device        = api.Device
	DeviceList    = api.DeviceList
	DeviceDetail  = api.DeviceDetail
	Event         = api.Event
	Release       = api.ReleaseSummary
	ReleaseList   = api.ReleaseList
	ReleaseDetail = api.ReleaseDetail
	ReleaseDevice = api.ReleaseDevice
	Wave          = api.ReleaseWave
	BrakesVerdict = api.Verdict
)

// Device states, and a device's parts in a release (see api.States,
// api.ReleaseStates).
const (
	StateFailed     = api.StateFailed
	StateError      = api.StateError
	StateHeld       = api.StateHeld
	StateStaging    = api.StateStaging
	StateDrifted    = api.StateDrifted
	StatePending    = api.StatePending
	StateApplied    = api.StateApplied
	StateSuperseded = api.StateSuperseded
	StateUnreported = api.StateUnreported
)

// Event kinds.
const (
	EventFirstSeen = api.EventFirstSeen
	EventStaging   = api.EventStaging
	EventApplied   = api.EventApplied
	EventHeld      = api.EventHeld
	EventFailed    = api.EventFailed
	EventError     = api.EventError
	EventDrift     = api.EventDrift
)
