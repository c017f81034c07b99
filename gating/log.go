package gating

// Log keys, the agent's names for them: a decision's lines read as the
// rest of a tick's.
const (
	keyDevice    = "device"
	keyRevision  = "revision"
	keyResources = "resources"
	keyReason    = "reason"
)
