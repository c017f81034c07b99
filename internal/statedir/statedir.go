package statedir

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Mode is the mode of a stateDir tend creates: others may pass through it,
// to the model versions services read (a service may run as another user),
// but not list it. What is private in it is so by its own mode: the clone
// of the fleet repo and service records (0700 folders), the inventory and
// the lock (0600).
const Mode fs.FileMode = 0o711

// The files in stateDir itself. Each has a method of Dir for its path; the
// names are for writers that take a folder and a name (atomicfile).
const (
	InventoryFile  = "inventory.json"  // every resource tend manages, and the applied revision
	QuarantineFile = "quarantine.json" // the commits this node rolled back
	VerdictFile    = "verdict.json"    // the release whose services' health is awaited, and what to roll back to
	StatusFile     = "status.json"     // the agent's last status document
	ReleasesFile   = "releases.json"   // when this node first saw the release waiting, and since when an update lock holds it
	ReportFile     = "report.json"     // the last report a collector accepted
	SuspendFile    = "suspended"       // present while `tend suspend` holds the node
	LockFile       = "lock"            // held by a tend while it applies
	AgentLockFile  = "agent.lock"      // held by the agent while it runs
	ReserveFile    = "reserve"         // space the agent keeps for a full disk (see package reserve)
)

// The folders in stateDir.
const (
	gitDir      = "git"
	ociDir      = "oci"
	blobsDir    = "blobs"
	modelsDir   = "models"
	servicesDir = "services"
	logsDir     = "logs"
)

// Dir is a stateDir: its path, and the paths of what tend keeps in it.
type Dir string

func (d Dir) join(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}

// Inventory is the inventory of every resource tend manages.
func (d Dir) Inventory() string { return d.join(InventoryFile) }

// Quarantine lists the commits this node rolled back.
func (d Dir) Quarantine() string { return d.join(QuarantineFile) }

// Verdict records the release whose services an apply started and has
// not yet judged healthy or not, with what made it new and what to roll
// back to; a tend that finds it resumes the wait.
func (d Dir) Verdict() string { return d.join(VerdictFile) }

// Status holds the status document of the agent's last tick.
func (d Dir) Status() string { return d.join(StatusFile) }

// Releases holds when this node first saw the release it waits for, and
// since when an update lock holds that release.
func (d Dir) Releases() string { return d.join(ReleasesFile) }

// Report caches the last report a collector accepted.
func (d Dir) Report() string { return d.join(ReportFile) }

// Suspended marks the node suspended.
func (d Dir) Suspended() string { return d.join(SuspendFile) }

// Lock is the lock a tend holds while it applies.
func (d Dir) Lock() string { return d.join(LockFile) }

// AgentLock is the lock an agent holds while it runs.
func (d Dir) AgentLock() string { return d.join(AgentLockFile) }

// Reserve is the space the agent keeps aside, and lets go of when the
// disk is full, to keep reverting drift.
func (d Dir) Reserve() string { return d.join(ReserveFile) }

// Git is the persistent bare clone of the fleet repo.
func (d Dir) Git() string { return d.join(gitDir) }

// OCI is where the fleet artifacts of an oci:// source are kept unpacked.
func (d Dir) OCI() Artifacts { return Artifacts(d.join(ociDir)) }

// Blobs is the content-addressed blob store.
func (d Dir) Blobs() Blobs { return Blobs(d.join(blobsDir)) }

// Models holds the model versions and their records.
func (d Dir) Models() Models { return Models(d.join(modelsDir)) }

// Services holds the records of services and of their instances.
func (d Dir) Services() Services { return Services(d.join(servicesDir)) }

// Logs is the folder of the output of service's replicas.
func (d Dir) Logs(service string) string { return d.join(logsDir, service) }

// Log is where the output of one replica of service goes.
func (d Dir) Log(service string, replica int) string {
	return d.join(logsDir, service, strconv.Itoa(replica)+logExt)
}

const logExt = ".log"

// LogReplica returns the replica whose output a file named name in Logs
// holds, false for a name that is no replica's log.
func LogReplica(name string) (int, bool) { return replicaOf(name, logExt) }

// Blobs is stateDir/blobs: a blob is stored whole as ALG/HEX, and grows as
// partial/ALG-HEX while it downloads. A tar layer is kept unpacked instead,
// as trees/ALG/HEX (see Tree), built in trees/partial/ALG-HEX under the lock
// trees/partial/ALG-HEX.lock.
type Blobs string

const (
	partialDir = "partial"
	treesDir   = "trees"
)

// Stored is the folder of the whole blobs of digest algorithm alg.
func (b Blobs) Stored(alg string) string { return filepath.Join(string(b), alg) }

// Blob is where the blob of digest alg:hex lives once stored.
func (b Blobs) Blob(alg, hex string) string { return filepath.Join(string(b), alg, hex) }

// Partials is the folder of downloads in progress.
func (b Blobs) Partials() string { return filepath.Join(string(b), partialDir) }

// Partial is the download in progress of the blob of digest alg:hex.
func (b Blobs) Partial(alg, hex string) string {
	return filepath.Join(string(b), partialDir, alg+digestSep+hex)
}

// Trees is the folder of the complete trees of digest algorithm alg.
func (b Blobs) Trees(alg string) string { return filepath.Join(string(b), treesDir, alg) }

// Tree is where the tar layer of digest alg:hex is kept unpacked.
func (b Blobs) Tree(alg, hex string) Tree { return Tree(filepath.Join(string(b), treesDir, alg, hex)) }

// TreePartials is the folder of trees being built (and of their locks).
func (b Blobs) TreePartials() string { return filepath.Join(string(b), treesDir, partialDir) }

// TreePartial is where the tree of the tar layer of digest alg:hex is
// built before it is renamed to Tree.
func (b Blobs) TreePartial(alg, hex string) Tree {
	return Tree(filepath.Join(string(b), treesDir, partialDir, alg+digestSep+hex))
}

// TreeLock is the lock held while the tree of digest alg:hex is built.
func (b Blobs) TreeLock(alg, hex string) string {
	return filepath.Join(string(b), treesDir, partialDir, alg+digestSep+hex+lockExt)
}

// Tree is one tar layer kept unpacked: its record, which lists every
// entry of the tar in order, and a folder holding the content of each of
// its regular files, named by its place in the record. A tree is complete
// when its record is there.
type Tree string

// The names in a Tree.
const (
	TreeRecordFile = "entries.json"
	treeFilesDir   = "files"
)

// Record lists the tree's entries.
func (t Tree) Record() string { return filepath.Join(string(t), TreeRecordFile) }

// Files is the folder of the tree's regular files.
func (t Tree) Files() string { return filepath.Join(string(t), treeFilesDir) }

// File is the content of regular file name (as its record names it).
func (t Tree) File(name string) string { return filepath.Join(string(t), treeFilesDir, name) }

// digestSep stands for the ':' of a digest in a name on disk.
const digestSep = "-"

// Digest returns the digest (ALG:HEX) a name on disk stands for: a file in
// Blobs.Partials or a folder in Artifacts.
func Digest(name string) string { return strings.Replace(name, digestSep, ":", 1) }

// Models is stateDir/models: a folder per model, NAME, holding its record,
// a folder per version and the default stable path; the refused digests;
// and models being removed, renamed aside first.
type Models string

// The files of Models.
const (
	ModelRecordFile = "model.json"   // in a model's folder
	ModelLink       = "current"      // a model's stable path when the manifest gives none
	RefusedFile     = "refused.json" // in Models
	TrashPrefix     = ".removed-"    // a model's folder being removed
)

// Model is the folder of model name.
func (m Models) Model(name string) string { return filepath.Join(string(m), name) }

// Version is the folder of the version of model name kept as dir.
func (m Models) Version(name, dir string) string { return filepath.Join(string(m), name, dir) }

// Record is the record of model name.
func (m Models) Record(name string) string {
	return filepath.Join(string(m), name, ModelRecordFile)
}

// Link is the default stable path of model name, the symlink to its active
// version.
func (m Models) Link(name string) string { return filepath.Join(string(m), name, ModelLink) }

// Refused lists the model digests not tried again.
func (m Models) Refused() string { return filepath.Join(string(m), RefusedFile) }

// Trash is where the folder of model name goes while it is removed.
func (m Models) Trash(name string) string { return filepath.Join(string(m), TrashPrefix+name) }

// Services is stateDir/services: a folder per service, NAME, holding its
// record and, per replica N, the record of its instance and its lock; and
// the images container services ran.
type Services string

// The files of Services.
const (
	ServiceFile = "service.json" // in a service's folder
	ImagesFile  = "images.json"  // in Services
)

const (
	recordExt = ".json"
	lockExt   = ".lock"
)

// Service is the folder of service name.
func (s Services) Service(name string) string { return filepath.Join(string(s), name) }

// Spec is the record of service name.
func (s Services) Spec(name string) string { return filepath.Join(string(s), name, ServiceFile) }

// Instance is the record of replica of service name.
func (s Services) Instance(name string, replica int) string {
	return filepath.Join(string(s), name, strconv.Itoa(replica)+recordExt)
}

// InstanceLock is the lock of replica of service name.
func (s Services) InstanceLock(name string, replica int) string {
	return filepath.Join(string(s), name, strconv.Itoa(replica)+lockExt)
}

// Images lists the images (REPO@sha256:…) container services ran, the
// most recently used first.
func (s Services) Images() string { return filepath.Join(string(s), ImagesFile) }

// InstanceReplica returns the replica whose record a file named name in a
// service's folder is, false for a name that is no instance record.
func InstanceReplica(name string) (int, bool) { return replicaOf(name, recordExt) }

func replicaOf(name, ext string) (int, bool) {
	n, ok := strings.CutSuffix(name, ext)
	if !ok {
		return 0, false
	}
	r, err := strconv.Atoi(n)
	return r, err == nil
}

// Artifacts is stateDir/oci: a folder per kept artifact, ALG-HEX of its
// manifest's digest, which appears under that name only once complete
// (unpacked into a folder named ArtifactTempPrefix… first).
type Artifacts string

// ArtifactTempPrefix starts the name of a folder an artifact is unpacked in.
const ArtifactTempPrefix = ".tmp-"

// Artifact is the folder of the artifact of manifest digest (ALG:HEX).
func (a Artifacts) Artifact(digest string) Artifact {
	return Artifact(filepath.Join(string(a), strings.Replace(digest, ":", digestSep, 1)))
}

// Artifact is one kept artifact's folder: what its manifest said, and its
// unpacked layer.
type Artifact string

// ArtifactFile is the name of an artifact's metadata in its folder.
const ArtifactFile = "artifact.json"

const artifactTree = "tree"

// Meta is what the artifact's manifest said.
func (a Artifact) Meta() string { return filepath.Join(string(a), ArtifactFile) }

// Tree is the artifact's unpacked layer.
func (a Artifact) Tree() string { return filepath.Join(string(a), artifactTree) }
