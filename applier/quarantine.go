package applier

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// QuarantineFile holds, in stateDir, the commits this node rolled back:
// they are not applied again, across restarts; a newer commit is.
const QuarantineFile = "quarantine.json"

// Quarantined is one rolled-back commit.
type Quarantined struct {
	Revision string    `json:"revision"` // ref@sha1:commit
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// LoadQuarantine reads the rolled-back commits, by commit hash.
func LoadQuarantine(stateDir string) (map[string]Quarantined, error) {
	data, err := os.ReadFile(stateDir + "/" + QuarantineFile)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Quarantined{}, nil
	}
	if err != nil {
		return nil, err
	}
	q := map[string]Quarantined{}
	if err := json.Unmarshal(data, &q); err != nil {
		return nil, fmt.Errorf("%w: %s/%s: %v; remove it to try every commit again", ErrCorruptInventory, stateDir, QuarantineFile, err)
	}
	return q, nil
}

// Quarantine records commit as rolled back.
func Quarantine(stateDir, commit string, q Quarantined) error {
	all, err := LoadQuarantine(stateDir)
	if err != nil {
		all = map[string]Quarantined{}
	}
	all[commit] = q
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(stateDir)
	if err != nil {
		return err
	}
	defer root.Close()
	return writeAtomic(root, QuarantineFile, append(data, '\n'), 0o644)
}
