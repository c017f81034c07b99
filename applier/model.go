package applier

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// FieldDigest is the field plans compare for a model: the digest of the
// manifest (or index) of the version active at the model's path.
const FieldDigest = "digest"

const modelPrefix = "model/"

// ModelID returns the resource id of the model called name.
func ModelID(name string) string { return modelPrefix + name }

// ModelName returns the name in a model resource id.
func ModelName(id string) string { return strings.TrimPrefix(id, modelPrefix) }

// modelsDir is where model versions and their records live in stateDir.
func modelsDir(stateDir string) string { return filepath.Join(stateDir, "models") }

// recordFile is the name of a model's record inside its folder.
const recordFile = "model.json"

// defaultLink is the name of a model's stable path inside its folder when
// the manifest gives none.
const defaultLink = "current"

// modelRecord is what tend keeps about one model: the versions materialised
// in stateDir/models/NAME, the active one first, and where its stable path
// (the symlink to the active version) is.
type modelRecord struct {
	Name     string         `json:"name"`
	Ref      string         `json:"ref"`
	Policy   string         `json:"policy,omitempty"`
	Path     string         `json:"path,omitempty"` // as declared; "" is stateDir/models/NAME/current
	Active   string         `json:"active,omitempty"`
	Versions []modelVersion `json:"versions"`
}

// modelVersion is one materialised version: a folder stateDir/models/NAME/DIR
// built from blobs of the store, and the fingerprint of every entry in it.
type modelVersion struct {
	Dir        string      `json:"dir"`
	Digest     string      `json:"digest"`
	Tag        string      `json:"tag,omitempty"`
	Blobs      []string    `json:"blobs"` // every blob the version was made from, manifests included
	Entries    []fileStamp `json:"entries"`
	VerifiedAt time.Time   `json:"verifiedAt"`
}

// fileStamp is one entry of a version folder. For a regular file it holds
// the content digest and a stat fingerprint: while size, mtime, ctime and
// inode are unchanged, the content is taken as unchanged too.
type fileStamp struct {
	Path   string `json:"path"`
	Type   string `json:"type,omitempty"` // "" regular file, "dir", "link"
	Target string `json:"target,omitempty"`
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size,omitempty"`
	Digest string `json:"digest,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	Mtime  int64  `json:"mtime,omitempty"`
	Ctime  int64  `json:"ctime,omitempty"`
}

// version returns the version kept in folder dir, or nil.
func (r *modelRecord) version(dir string) *modelVersion {
	for i := range r.Versions {
		if r.Versions[i].Dir == dir {
			return &r.Versions[i]
		}
	}
	return nil
}

// active returns the active version, or nil.
func (r *modelRecord) active() *modelVersion {
	if r == nil || r.Active == "" {
		return nil
	}
	return r.version(r.Active)
}

// loadRecord reads the record of model name; a model tend has never pulled
// has none (nil, nil).
func loadRecord(models, name string) (*modelRecord, error) {
	file := filepath.Join(models, name, recordFile)
	var r modelRecord
	found, err := readJSON(file, &r)
	if errors.Is(err, ErrCorruptInventory) {
		return nil, fmt.Errorf("%w; remove the folder %s and tend pulls the model again", err, filepath.Dir(file))
	}
	if err != nil || !found {
		return nil, err
	}
	return &r, nil
}

// save writes the record atomically.
func (r *modelRecord) save(models string) error {
	return writeJSON(filepath.Join(models, r.Name), recordFile, r, 0o644)
}
