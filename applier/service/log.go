package service

// Log keys of the service driver and the supervisor.
const (
	logKeyResource = "resource"
	logKeyReplica  = "replica"
	logKeyPID      = "pid"
	logKeyError    = "error"
	logKeyExit     = "exit"
)
