package applier

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/failpoint"
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
	q := map[string]Quarantined{}
	if _, err := atomicfile.ReadJSON(filepath.Join(stateDir, QuarantineFile), &q); err != nil {
		if errors.Is(err, atomicfile.ErrCorrupt) {
			err = fmt.Errorf("%w; remove it to try every commit again", err)
		}
		return nil, err
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
	failpoint.Hit("quarantine:write")
	return atomicfile.WriteJSON(stateDir, QuarantineFile, all, 0o644)
}
