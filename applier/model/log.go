package model

// Log keys.
const (
	logKeyResource = "resource"
	logKeyDigest   = "digest"
	logKeyError    = "error"
	logKeySkipped  = "skipped"
)
