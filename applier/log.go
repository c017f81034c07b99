package applier

// Log keys.
const (
	logKeyResource = "resource"
	logKeyAction   = "action"
	logKeyReason   = "reason"
	logKeyDrift    = "drift"
	logKeyReplica  = "replica"
	logKeyPID      = "pid"
	logKeyError    = "error"
	logKeyDigest   = "digest"
	logKeyRevision = "revision"
	logKeySince    = "since"
	logKeyStateDir = "stateDir"
	logKeyFrom     = "from"
	logKeyTo       = "to"
	logKeyCopy     = "copy"
)
