package model

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/render"
)

// record is what tend keeps about one model: the versions materialised in
// stateDir/models/NAME, the active one first, and where its stable path
// (the symlink to the active version) is.
type record struct {
	Name     string    `json:"name"`
	Ref      string    `json:"ref"`
	Policy   string    `json:"policy,omitempty"`
	Path     string    `json:"path,omitempty"` // as declared; "" is stateDir/models/NAME/current
	Active   string    `json:"active,omitempty"`
	Versions []version `json:"versions"`
}

// version is one materialised version: a folder stateDir/models/NAME/DIR
// built from blobs of the store, and the fingerprint of every entry in it.
type version struct {
	Dir        string      `json:"dir"`
	Digest     string      `json:"digest"`
	Tag        string      `json:"tag,omitempty"`
	Include    []string    `json:"include,omitempty"` // what the folder holds of the version; nil: all
	Bases      []string    `json:"bases,omitempty"`   // the base ModelKits its model came from: "REF → sha256:…"
	Blobs      []string    `json:"blobs"`             // every blob the version was made from, manifests included
	Entries    []fileStamp `json:"entries"`
	VerifiedAt time.Time   `json:"verifiedAt"`
	// Skipped names the fifos and device nodes of its tar layers the
	// folder leaves out ("fifo run/ctl").
	Skipped []string `json:"skipped,omitempty"`
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
func (r *record) version(dir string) *version {
	for i := range r.Versions {
		if r.Versions[i].Dir == dir {
			return &r.Versions[i]
		}
	}
	return nil
}

// active returns the active version, or nil.
func (r *record) active() *version {
	if r == nil || r.Active == "" {
		return nil
	}
	return r.version(r.Active)
}

// pinned returns what the active version was pulled for, as render
// compares it, or nil.
func (r *record) pinned() *render.Active {
	v := r.active()
	if v == nil {
		return nil
	}
	return &render.Active{Ref: r.Ref, Policy: r.Policy, Digest: v.Digest, Tag: v.Tag, Include: v.Include, Bases: v.Bases}
}

// loadRecord reads the record of model name; a model tend has never pulled
// has none (nil, nil).
func loadRecord(models statedir.Models, name string) (*record, error) {
	file := models.Record(name)
	var r record
	found, err := statedir.ReadJSON(file, &r)
	if errors.Is(err, atomicfile.ErrCorrupt) {
		return nil, fmt.Errorf("%w; remove the folder %s and tend pulls the model again", err, filepath.Dir(file))
	}
	if err != nil || !found {
		return nil, err
	}
	return &r, nil
}

// save writes the record atomically.
func (r *record) save(models statedir.Models) error {
	return statedir.WriteJSON(models.Model(r.Name), statedir.ModelRecordFile, r, 0o644)
}
