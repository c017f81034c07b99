package model

import "github.com/tend-dev/tend/render"

// Record, LoadRecord, Save and StatIDs let a test forge a model's record:
// TestModelDeepVerify makes a fingerprint match a file it changed.
type Record = record

// LoadRecord reads the record of model name in stateDir.
func LoadRecord(stateDir, name string) (*Record, error) {
	return loadRecord(render.ModelsDir(stateDir), name)
}

// Save writes the record into stateDir.
func (r *record) Save(stateDir string) error { return r.save(render.ModelsDir(stateDir)) }

// StatIDs is statIDs.
var StatIDs = statIDs
