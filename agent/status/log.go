package status

// Log keys, the same names as the agent's.
const (
	keyDevice = "device"
	keyError  = "error"
)
