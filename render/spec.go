package render

import (
	"io/fs"
	"time"

	"github.com/tend-dev/tend/manifest"
)

// File is a file as its driver writes it.
type File struct {
	Path    string // absolute and clean, under an allowed path
	Content []byte
	Mode    fs.FileMode // permission, setuid, setgid and sticky bits
	// Sensitive hides Content in every output: diffs show sizes and
	// digests only.
	Sensitive bool
}

// Model is a model pinned to the version its driver activates.
type Model struct {
	Name   string
	Ref    string // as declared
	Policy string // the semver range of policy.semver; "" for none
	Path   string // the declared stable path; "" for stateDir/models/NAME/current
	Digest string // what the ref resolved to (the ref itself when unresolved)
	Tag    string // the tag it resolved through; "" for a digest ref
	// Include is the declared include: the files of the artifact pulled
	// (nil: all). A version folder holds what its include selected, so a
	// new include is a new version.
	Include []string
	// Files are the files of the artifact the include selects, when the
	// resolver read them all (see Resolution.Files); nil otherwise.
	Files []string
	// Bases are the base ModelKits the version's model comes from, each
	// "REF → sha256:…" as it was pinned when the version was read (see
	// Resolution.Bases).
	Bases []string
	// Offline, Held, Quarantined, ActiveUnverified, Skips and Download
	// are the resolution's (see Resolution).
	Offline          error
	Held             error
	Quarantined      error
	ActiveUnverified error
	Skips            []Skip
	Download         int64
}

// The kinds of runtime a service runs on, as its manifest declares it.
const (
	KindProcess   = "process"
	KindContainer = "container"
)

// Service is a service with every reference expanded, one Replica per
// instance to run.
type Service struct {
	Name string
	// Kind is the kind of runtime that runs it: KindProcess for a
	// command, KindContainer for an image.
	Kind string
	Hash string // of the expanded spec: the field plans compare
	// Declared is the hash of the spec with its image as declared, not
	// as resolved: a tag that moved leaves it as it was (see
	// Desired.Declaration). A process's is its Hash.
	Declared    string
	Restart     string // always (""), on-failure or never
	StopTimeout time.Duration
	Replicas    []Replica
	// Image is a container service's image as declared, with the digest
	// it resolved to and the tag it resolved through; "" for a process.
	Image, ImageDigest, ImageTag string
	// ImagePull says the node does not have the image yet (see
	// Resolution.Pull).
	ImagePull bool
	// Inputs holds, by id, what each resource the service depends on is
	// declared as (its fields' values): an instance started with other
	// values owes a restart.
	Inputs map[string]string
}

// Replica is one instance of a service, ${replica} expanded to its index.
type Replica struct {
	Command    []string
	Env        map[string]string
	WorkingDir string
	User       string
	Group      string
	Memory     int64 // bytes; 0 = no limit
	CPUMilli   int64 // millicores; 0 = no limit
	Health     *manifest.Health
	// A container's (Image is set): the image by digest (REPO@sha256:…),
	// the entrypoint's arguments, its mounts with every source a path on
	// the node, its network, device nodes and GPUs.
	Image   string
	Args    []string
	Mounts  []manifest.Mount
	Network string
	Devices []string
	GPUs    string
}
