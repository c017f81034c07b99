package applier

// Log keys.
const (
	logKeyResource = "resource"
	logKeyAction   = "action"
	logKeyReason   = "reason"
	logKeyDrift    = "drift"
)
