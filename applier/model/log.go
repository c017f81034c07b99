package model

// Log keys.
const (
	logKeyResource = "resource"
	logKeyDigest   = "digest"
	logKeyError    = "error"
	logKeyBytes    = "bytes"
	logKeySkipped  = "skipped"
)
