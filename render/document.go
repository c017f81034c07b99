package render

import (
	"fmt"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Document is a desired state as `tend render` prints it: the device's
// declaration, with every model's ref pinned to the digest it resolved to.
type Document struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   manifest.Metadata `json:"metadata"`
	Spec       DocumentSpec      `json:"spec"`
}

// DocumentSpec lists the resources of a Document.
type DocumentSpec struct {
	Models   []DocumentModel    `json:"models,omitempty"`
	Files    []manifest.File    `json:"files,omitempty"`
	Services []manifest.Service `json:"services,omitempty"`
}

// DocumentModel is a declared model and what it resolved to.
type DocumentModel struct {
	manifest.Model
	Digest string `json:"digest,omitempty"` // sha256:…, when resolved
	Tag    string `json:"tag,omitempty"`    // the tag a semver policy chose
	Held   string `json:"held,omitempty"`   // why it is held at the active version
	// Offline says why the registry was not asked: the digest is the one
	// applied last, and the ref did not change.
	Offline string `json:"offline,omitempty"`
	// Quarantined says why its newest version was passed over: it was
	// rolled back on this node.
	Quarantined string `json:"quarantined,omitempty"`
	// Unverified says which newer versions its policy passed over because
	// they are not signed as verify asks, and what it resolved to.
	Unverified string `json:"unverified,omitempty"`
}

// Document returns d as `tend render` prints it.
func (d *Desired) Document() Document {
	dev := d.Manifest
	if dev == nil {
		dev = &manifest.Device{}
	}
	doc := Document{APIVersion: manifest.APIVersion, Kind: manifest.KindDevice, Metadata: dev.Metadata,
		Spec: DocumentSpec{Files: maskSensitive(dev.Spec.Files), Services: dev.Spec.Services}}
	for _, m := range dev.Spec.Models {
		dm := DocumentModel{Model: m}
		if spec, ok := d.Model(m.Name); ok {
			if _, err := v1.NewHash(spec.Digest); err == nil {
				dm.Digest = spec.Digest
			}
			if spec.Policy != "" {
				dm.Tag = spec.Tag
			}
			if spec.Held != nil {
				dm.Held = spec.Held.Error()
			}
			if spec.Offline != nil {
				dm.Offline = spec.Offline.Error()
			}
			if spec.Quarantined != nil {
				dm.Quarantined = spec.Quarantined.Error()
			}
			if u := unverified(spec.Skips); u != nil {
				dm.Unverified = u.Error()
			}
		}
		doc.Spec.Models = append(doc.Spec.Models, dm)
	}
	return doc
}

// maskSensitive returns files with the content of every sensitive one
// replaced by planner.SensitiveHidden, its size and digest.
func maskSensitive(files []manifest.File) []manifest.File {
	out := slices.Clone(files)
	for i, f := range out {
		if f.Sensitive {
			out[i].Content = fmt.Sprintf("%s %d bytes, %s", planner.SensitiveHidden, len(f.Content), ContentDigest([]byte(f.Content)))
		}
	}
	return out
}
