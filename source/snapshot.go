package source

import "fmt"

// Path is one folder of the fleet repo a device reads.
type Path struct {
	Dir string // placeholders expanded; "" or "." = the repo root
	// PerDevice is set when the configured pattern held {device}: the
	// folder is the device's own, and a device may have none.
	PerDevice bool
}

// File is one manifest file read at a revision.
type File struct {
	Path      string // repo-relative, slash-separated, e.g. devices/cam-017/models.yaml
	Data      []byte
	PerDevice bool // read from a Path with PerDevice
}

// Snapshot is what a fetch read: one device's manifest files at one
// revision. The render stage reads it, whichever source it came from.
type Snapshot struct {
	URL string // redacted: no userinfo
	// Revision is the ref asked for (or the one a fleet artifact was
	// published from) and the commit read.
	Revision Revision
	Files    []File // every *.yaml / *.yml under each path (recursively), once, sorted by Path
	Fetched  bool   // false when the revision was already kept on the node and nothing was downloaded
	// Stale is set when the target could not be used (the remote is
	// unreachable or refuses the credentials, the target is unsigned, a
	// rewind, or has no manifests) and the snapshot is the last applied
	// revision kept on the node instead: the node is held at its last
	// applied state, and the error must still be shown.
	Stale error
}

// String names the snapshot in messages: "URL@ref (rev[:12])".
func (s *Snapshot) String() string {
	return fmt.Sprintf("%s@%s (%s)", s.URL, s.Revision.DisplayRef(), s.Revision.Short())
}
