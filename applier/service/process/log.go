//go:build linux

package process

// Log keys of the exec runtime.
const (
	logKeyService = "service"
	logKeyReplica = "replica"
	logKeyPID     = "pid"
	logKeyShim    = "shim"
	logKeyCommand = "command"
	logKeyCgroup  = "cgroup"
	logKeyStatus  = "status"
	logKeyLimits  = "limits"
	logKeyError   = "error"
)
