package applier

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/statedir"
)

// Quarantined is one rolled-back commit, kept in statedir's quarantine.json:
// it is not applied again, across restarts; a newer commit is.
type Quarantined struct {
	Revision string    `json:"revision"` // ref@sha1:commit
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// LoadQuarantine reads the rolled-back commits, by commit hash.
func LoadQuarantine(stateDir string) (map[string]Quarantined, error) {
	q := map[string]Quarantined{}
	if _, err := atomicfile.ReadJSON(statedir.Dir(stateDir).Quarantine(), &q); err != nil {
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
	return atomicfile.WriteJSON(stateDir, statedir.QuarantineFile, all, 0o644)
}

// Unquarantine forgets the rolled-back commits whose hash starts with
// commit, or every one when commit is "", so they are applied again, and
// returns them, oldest first. A commit that names no quarantined commit,
// or more than one, is an error listing the quarantined ones. The caller
// holds the stateDir lock.
func Unquarantine(stateDir, commit string) ([]Quarantined, error) {
	all, err := LoadQuarantine(stateDir)
	if err != nil {
		return nil, err
	}
	var hashes []string
	for h := range all {
		if strings.HasPrefix(h, strings.ToLower(commit)) {
			hashes = append(hashes, h)
		}
	}
	if commit != "" && len(hashes) != 1 {
		return nil, unquarantineError(commit, len(hashes), all)
	}
	cleared := make([]Quarantined, 0, len(hashes))
	for _, h := range hashes {
		cleared = append(cleared, all[h])
		delete(all, h)
	}
	sort.Slice(cleared, func(i, j int) bool { return cleared[i].At.Before(cleared[j].At) })
	if len(cleared) == 0 {
		return nil, nil
	}
	if len(all) == 0 {
		if err := os.Remove(statedir.Dir(stateDir).Quarantine()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return cleared, nil
	}
	return cleared, atomicfile.WriteJSON(stateDir, statedir.QuarantineFile, all, 0o644)
}

func unquarantineError(commit string, matches int, all map[string]Quarantined) error {
	var known []string
	for _, q := range all {
		known = append(known, q.Revision)
	}
	sort.Strings(known)
	list := "none is"
	if len(known) > 0 {
		list = strings.Join(known, ", ") + " are"
	}
	if matches > 1 {
		return fmt.Errorf("commit %s is ambiguous: give more of its hash (%s quarantined)", commit, list)
	}
	return fmt.Errorf("commit %s is not quarantined on this node (%s quarantined)", commit, list)
}
