package diff

import "errors"

var (
	// ErrNoDevicePlaceholder means neither the path nor the ref pattern
	// contains {device}, so there is no way to tell devices apart.
	ErrNoDevicePlaceholder = errors.New("no {device} in the path or ref pattern")

	// ErrBadPattern means a path or ref pattern cannot be used: an unknown
	// placeholder, {device} twice, an absolute path or "..".
	ErrBadPattern = errors.New("bad pattern")

	// ErrUnknownRevision means a --base, --head or --rev names no branch,
	// tag or commit of the repository.
	ErrUnknownRevision = errors.New("unknown revision")
)
