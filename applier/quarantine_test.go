package applier

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
)

func TestUnquarantine(t *testing.T) {
	dir := t.TempDir()
	const a, b = "aaaa000000000000000000000000000000000000", "aaab000000000000000000000000000000000000"
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, Quarantine(dir, a, Quarantined{Revision: "main@sha1:" + a, Reason: "unhealthy", At: at}))
	require.NoError(t, Quarantine(dir, b, Quarantined{Revision: "main@sha1:" + b, Reason: "unhealthy", At: at.Add(time.Hour)}))

	_, err := Unquarantine(dir, "aaa")
	require.EqualError(t, err, "commit aaa is ambiguous: give more of its hash (main@sha1:"+a+", main@sha1:"+b+" are quarantined)")
	_, err = Unquarantine(dir, "bbbb")
	require.ErrorContains(t, err, "commit bbbb is not quarantined on this node")

	got, err := Unquarantine(dir, "AAAA")
	require.NoError(t, err)
	require.Equal(t, []Quarantined{{Revision: "main@sha1:" + a, Reason: "unhealthy", At: at}}, got)
	left, err := LoadQuarantine(dir)
	require.NoError(t, err)
	require.Len(t, left, 1)

	got, err = Unquarantine(dir, "")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoFileExists(t, statedir.Dir(dir).Quarantine(), "an empty quarantine is removed")
	got, err = Unquarantine(dir, "")
	require.NoError(t, err)
	require.Empty(t, got)
}

// A model version's entry sits in the same map as the commits: a tend
// that knows only commits reads the map (its entry type has no tag) and
// looks commits up by hash, which never names a model's key; tend retry
// of a commit leaves the model's entry, and of the model's key (its digest
// abbreviated) leaves the commit's.
func TestQuarantineModelKeysNextToCommits(t *testing.T) {
	dir := t.TempDir()
	const commit = "6ab5000000000000000000000000000000000000"
	digest := "sha256:6ab50ca1075d" + strings.Repeat("0", 52)
	key := ReleaseKey("model/m", digest)
	require.Equal(t, "model/m@"+digest, key)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, Quarantine(dir, commit, Quarantined{Revision: "main@sha1:" + commit, Reason: "unhealthy", At: at}))
	require.NoError(t, Quarantine(dir, key, Quarantined{Revision: key, Tag: "1.2.0", Reason: "model bad", At: at},
		Keyed{Key: ReleaseKey("model/n", digest), Quarantined: Quarantined{Revision: ReleaseKey("model/n", digest), Reason: "model bad", At: at}}))

	b, err := os.ReadFile(statedir.Dir(dir).Quarantine())
	require.NoError(t, err)
	type older struct { // an older tend's entry
		Revision string    `json:"revision"`
		Reason   string    `json:"reason"`
		At       time.Time `json:"at"`
	}
	var file struct {
		Quarantined map[string]older `json:"quarantined"`
	}
	require.NoError(t, json.Unmarshal(b, &file))
	old := file.Quarantined
	require.Len(t, old, 3)
	require.Equal(t, "unhealthy", old[commit].Reason)
	require.Equal(t, older{Revision: key, Reason: "model bad", At: at}, old[key])

	_, err = Unquarantine(dir, "6ab5")
	require.NoError(t, err, "a hash prefix matches the commit only")
	_, err = Unquarantine(dir, "model/x@sha256:6ab5")
	require.EqualError(t, err, "release model/x@sha256:6ab5 is not quarantined on this node ("+key+", "+ReleaseKey("model/n", digest)+" are quarantined)")
	got, err := Unquarantine(dir, "model/m@sha256:6AB50ca1075d")
	require.NoError(t, err)
	require.Equal(t, []Quarantined{{Revision: key, Tag: "1.2.0", Reason: "model bad", At: at}}, got)
	left, err := LoadQuarantine(dir)
	require.NoError(t, err)
	require.Equal(t, []string{ReleaseKey("model/n", digest)}, slices.Collect(maps.Keys(left)))
}
