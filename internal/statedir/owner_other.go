//go:build !unix

package statedir

import "io/fs"

// sameOwner does nothing where files have no Unix owner.
func sameOwner(string, fs.FileInfo) error { return nil }
