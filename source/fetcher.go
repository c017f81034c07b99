package source

import (
	"context"
	"fmt"
)

// Fetcher reads one device's manifests from where the fleet is kept: a Git
// repo (gitsource) or the repo published as an OCI artifact (ocisource).
// The agent builds one from its config and keeps it for its life, so a
// source may keep what it learnt (a clone, a registry session) from one
// tick to the next. Verification of what was fetched happens inside Fetch.
type Fetcher interface {
	// Fetch reads the target the source names now. When the target cannot
	// be used and the last applied revision is kept on the node, it
	// returns that one with the cause in Snapshot.Stale.
	Fetch(ctx context.Context, req Request) (*Snapshot, error)
	// Applied reads rev, the revision the node applied, from the copy kept
	// on the node, with no network; the snapshot is named rev.
	Applied(ctx context.Context, rev Revision, paths []Path) (*Snapshot, error)
}

// Request is what one Fetch reads and how the node's state judges it.
type Request struct {
	Paths []Path // folders of the tree the device reads
	// LastApplied is the revision the node last applied in full (zero for
	// none): a target that would roll the node back from it is refused
	// unless AllowRewind. Each source decides what counts as "from it"
	// (a Git source only compares within the same ref).
	LastApplied Revision
	AllowRewind bool
	// Quarantined holds commits (full hashes) this node rolled back, with
	// why: such a target is refused and the last applied revision held.
	Quarantined map[string]string
	// Stage, when set, has a target whose content must be downloaded (a
	// fleet artifact's layer) downloaded in the background: Fetch returns
	// a *StagingError at once, and Stage is called when that download
	// ends, done or failed. Nil downloads in the Fetch.
	Stage func()
}

// StagingError says the target is downloading in the background (see
// Request.Stage); the node holds its applied revision meanwhile.
type StagingError struct {
	What       string // what downloads, for people: "fleet artifact oci://…@sha256:…"
	Revision   Revision
	Bytes      int64 // on disk so far
	TotalBytes int64
	Err        error // why the last attempt failed; nil while none did
}

func (e *StagingError) Error() string {
	s := fmt.Sprintf("%s is downloading in the background (%d of %d bytes)", e.What, e.Bytes, e.TotalBytes)
	if e.Err != nil {
		s += fmt.Sprintf("; the last attempt failed: %v", e.Err)
	}
	return s
}
