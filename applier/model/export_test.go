package model

import "github.com/tend-dev/tend/internal/statedir"

// Record, LoadRecord, Save and StatIDs let a test forge a model's record:
// TestModelDeepVerify makes a fingerprint match a file it changed.
type Record = record

// LoadRecord reads the record of model name in stateDir.
func LoadRecord(stateDir, name string) (*Record, error) {
	return loadRecord(statedir.Dir(stateDir).Models(), name)
}

// Save writes the record into stateDir.
func (r *record) Save(stateDir string) error { return r.save(statedir.Dir(stateDir).Models()) }

// StatIDs is statIDs.
var StatIDs = statIDs
