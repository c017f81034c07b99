package applier

import (
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
