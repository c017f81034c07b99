package verify

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

// A requirement's fingerprint is remembered by the sizes and times of
// its files: while they stay, the files are not read again (content
// changed under the same size and time goes unseen); a changed time, a
// changed size or a changed trust store listing reads them again. A file
// modified within fingerprintSettle of the stat is read at every
// verification, since a rewrite in the same tick of the file system's
// clock would keep its time.
func TestFingerprintRemembered(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "release.pub")
	old := time.Now().Add(-time.Hour)
	write := func(content string, at time.Time) {
		t.Helper()
		require.NoError(t, os.WriteFile(key, []byte(content), 0o644))
		require.NoError(t, os.Chtimes(key, at, at))
	}
	v := &Verifier{}
	q := requirement{cosign: &manifest.CosignVerify{Keys: []string{key}}}
	fp := func() string {
		t.Helper()
		s, err := v.fingerprint(q)
		require.NoError(t, err)
		return s
	}

	write("key one", old)
	first := fp()
	write("key two", old)
	require.Equal(t, first, fp(), "same size and time: not read again")
	write("key two", old.Add(time.Second))
	second := fp()
	require.NotEqual(t, first, second, "a new time reads the file")
	write("key 2", old.Add(time.Second))
	require.NotEqual(t, second, fp(), "a new size reads the file")

	t.Run("a file not settled is read each time", func(t *testing.T) {
		recent := time.Now()
		write("key one", recent)
		a := fp()
		write("key two", recent)
		require.NotEqual(t, a, fp())
	})

	t.Run("a trust store's listing", func(t *testing.T) {
		policy := filepath.Join(dir, "trustpolicy.json")
		store := filepath.Join(dir, "store")
		require.NoError(t, os.MkdirAll(filepath.Join(store, "x509/ca/acme"), 0o755))
		require.NoError(t, os.WriteFile(policy, []byte("{}"), 0o644))
		require.NoError(t, os.Chtimes(policy, old, old))
		n := requirement{notation: &manifest.NotationVerify{TrustPolicy: policy, TrustStore: store}}
		a, err := v.fingerprint(n)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(store, "x509/ca/acme/root.crt"), []byte("cert"), 0o644))
		b, err := v.fingerprint(n)
		require.NoError(t, err)
		require.NotEqual(t, a, b, "a certificate added")
	})
}
