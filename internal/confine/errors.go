package confine

import "errors"

// Sentinel errors. Every error the package returns that one of these
// describes wraps it, so callers can branch with errors.Is. None of them is
// worth retrying before the manifest or the node changes.
var (
	// ErrInvalidPath: a declared path is not absolute and clean.
	ErrInvalidPath = errors.New("invalid path")
	// ErrNotAllowed: a declared path is not under any allowPaths entry.
	ErrNotAllowed = errors.New("path not allowed")
	// ErrSymlinkEscape: a symlink would lead a path out of its allowed
	// directory: one inside it points outside, or one sits between root
	// and the allowed directory, where tend follows none.
	ErrSymlinkEscape = errors.New("symlink escape")
	// ErrNotRegular: something other than a regular file is where tend
	// must write one, and tend will not replace it.
	ErrNotRegular = errors.New("not a regular file")
)
