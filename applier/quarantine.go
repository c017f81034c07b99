package applier

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Quarantined is one rolled-back release, kept in statedir's
// quarantine.json: it is not applied again, across restarts. It is keyed
// by what made the release new: a commit hash (a newer commit is applied),
// or, when the commit did not move, each model digest and container image
// digest that did, under ReleaseKey (a newer digest is taken). A tend that
// knows only commits looks keys up by hash, so it never matches a
// digest's key. The entry is written before the rollback begins: a tend
// killed while it rolls back does not try the release again.
type Quarantined struct {
	Revision string `json:"revision"`      // ref@sha1:commit, or model/NAME@sha256:HEX, service/NAME@sha256:HEX
	Tag      string `json:"tag,omitempty"` // the tag a digest was resolved through
	// Applied is the fleet revision (ref@sha1:commit) a digest was rolled
	// back at; "" for a commit, which is its own Revision.
	Applied string    `json:"applied,omitempty"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// Releases lists the releases rolled back on this node, oldest first.
func Releases(stateDir string) ([]Quarantined, error) {
	q, err := LoadQuarantine(stateDir)
	if err != nil {
		return nil, err
	}
	out := make([]Quarantined, 0, len(q))
	for _, e := range q {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Revision < out[j].Revision
	})
	return out, nil
}

// ReleaseKey is the quarantine key of digest for resource id: a model's,
// "model/NAME@sha256:HEX", or a container service's image,
// "service/NAME@sha256:HEX".
func ReleaseKey(id, digest string) string { return id + "@" + digest }

// LoadQuarantine reads the rolled-back releases, by commit hash or
// ReleaseKey.
func LoadQuarantine(stateDir string) (map[string]Quarantined, error) {
	q := map[string]Quarantined{}
	if _, err := statedir.ReadJSON(statedir.Dir(stateDir).Quarantine(), &q); err != nil {
		if errors.Is(err, atomicfile.ErrCorrupt) {
			err = fmt.Errorf("%w; remove it to try every commit again", err)
		}
		return nil, err
	}
	return q, nil
}

// Quarantine records commit (or a ReleaseKey) as rolled back; more keys
// may follow, each with its own entry, in one write.
func Quarantine(stateDir, commit string, q Quarantined, more ...Keyed) error {
	all, err := LoadQuarantine(stateDir)
	if _, newer := errors.AsType[*statedir.NewerError](err); newer {
		return err // a newer tend's record is not written over
	} else if err != nil {
		all = map[string]Quarantined{}
	}
	all[commit] = q
	for _, k := range more {
		all[k.Key] = k.Quarantined
	}
	failpoint.Hit("quarantine:write")
	return statedir.WriteJSON(stateDir, statedir.QuarantineFile, all, 0o644)
}

// releaseKeys returns the quarantine entries of release d, whose plan
// applied the resources ids before a service failed, against the
// inventory inv as it was before the plan: the parts of its key (see
// ReleaseOf), its commit's hash when the commit changed what the device
// runs, otherwise each model digest and container image digest among ids
// that moved. It returns none when nothing moved (a restart after drift):
// holding that would hold nothing, and the loop's backoff spaces the
// retries instead.
func releaseKeys(inv *Inventory, d *render.Desired, ids []string, reason string, at time.Time) []Keyed {
	key := ReleaseOf(inv, d)
	if hash, ok := key.Commit(); ok {
		return []Keyed{{Key: hash, Quarantined: Quarantined{Revision: d.Revision, Reason: reason, At: at}}}
	}
	var keyed []Keyed
	for _, part := range key.Parts() {
		id, _, _ := strings.Cut(part, "@")
		if !slices.Contains(ids, id) {
			continue
		}
		var tag string
		switch s := d.Specs[id].(type) {
		case render.Model:
			tag = s.Tag
		case render.Service:
			tag = s.ImageTag
		}
		keyed = append(keyed, Keyed{Key: part, Quarantined: Quarantined{Revision: part, Tag: tag, Applied: d.Revision, Reason: reason, At: at}})
	}
	return keyed
}

// fieldValue is the value of the field named name, "" without one.
func fieldValue(fields []planner.Field, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// quarantine records keyed (see releaseKeys) before a rollback.
func (a *Applier) quarantine(ctx context.Context, keyed []Keyed) error {
	if len(keyed) == 0 {
		return nil
	}
	for _, k := range keyed {
		a.logger.WarnContext(ctx, "quarantined", logKeyRevision, k.Revision, logKeyReason, k.Reason)
	}
	if err := Quarantine(a.stateDir, keyed[0].Key, keyed[0].Quarantined, keyed[1:]...); err != nil {
		return fmt.Errorf("record the rolled-back release: %w", err)
	}
	failpoint.Hit("quarantine:written")
	return nil
}

// Keyed is a quarantine entry with its key.
type Keyed struct {
	Key string
	Quarantined
}

// Unquarantine forgets the rolled-back commits whose hash starts with
// commit (or the release whose ReleaseKey starts with it, e.g.
// "model/m@sha256:6ab5"), or every one when commit is "", so they are
// applied again, and
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
		if strings.HasPrefix(strings.ToLower(h), strings.ToLower(commit)) {
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
	return cleared, statedir.WriteJSON(stateDir, statedir.QuarantineFile, all, 0o644)
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
	what := "commit"
	if strings.Contains(commit, "/") {
		what = "release"
	}
	if matches > 1 {
		return fmt.Errorf("%s %s is ambiguous: give more of its hash (%s quarantined)", what, commit, list)
	}
	return fmt.Errorf("%s %s is not quarantined on this node (%s quarantined)", what, commit, list)
}
