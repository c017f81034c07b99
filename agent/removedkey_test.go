package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testcosign"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
)

// A key removed from models.verify leaves the model it alone signed
// running, and the status warns that the running version no longer
// verifies: nothing is rolled back, the tick succeeds. The verifier
// remembers results by the requirements, key files' content included, so
// a key file rewritten while the agent runs warns at the next tick, later
// ticks ask the registry nothing, and the old key put back clears the
// warning without a request. An agent restarted with the key removed
// from its config warns at its first tick.
func TestRemovedKeyWarns(t *testing.T) {
	cosign := testcosign.New(t)
	oldPriv, oldPub := cosign.KeyPair("old")
	_, newPub := cosign.KeyPair("new")
	reg := testoci.Start(t)
	v1 := reg.PushFiles(t, "models/m:v1", map[string][]byte{"w.bin": []byte("weights one")})
	cosign.Sign(oldPriv, reg.Ref("models/m@"+v1))
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return b
	}
	release := filepath.Join(t.TempDir(), "release.pub")
	require.NoError(t, os.WriteFile(release, read(oldPub), 0o644))

	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good")+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v1")+"}\n")
	repo.Commit("good")
	c := newConfig(t, repo.Dir())
	c.Registries.Insecure = []string{reg.Host}
	c.Models.Verify = &manifest.ArtifactVerify{Cosign: &manifest.CosignVerify{Keys: []string{release}}}
	require.NoError(t, c.Validate())
	h := heldLoopOf(c)
	weights := func() string { return string(read(filepath.Join(c.StateDir, "models/m/current/w.bin"))) }
	warning := func(key string) string {
		return "model/m runs " + reg.Ref("models/m") + "@" + v1 + ", which no longer verifies: no cosign signature by " + key +
			" (found 1 signature by another key); it keeps running, and a new version must verify"
	}

	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "weights one", weights())
	require.Empty(t, h.tracker.Status().Warning)

	require.NoError(t, os.WriteFile(release, read(newPub), 0o644))
	h.scheduled()
	require.NoError(t, h.err, "a running version that no longer verifies fails nothing")
	require.Equal(t, warning(release), h.tracker.Status().Warning)
	require.Equal(t, "weights one", weights(), "nothing is rolled back")

	asked := h.r.verifier().Requests()
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, warning(release), h.tracker.Status().Warning)
	require.Equal(t, asked, h.r.verifier().Requests(), "the next tick asks the registry nothing")

	require.NoError(t, os.WriteFile(release, read(oldPub), 0o644))
	h.scheduled()
	require.NoError(t, h.err)
	require.Empty(t, h.tracker.Status().Warning, "the old key back, the version verifies again")
	require.Equal(t, asked, h.r.verifier().Requests(), "as it was remembered to")

	// The agent restarts with the old key removed from its config.
	c.Models.Verify = &manifest.ArtifactVerify{Cosign: &manifest.CosignVerify{Keys: []string{newPub}}}
	require.NoError(t, c.Validate())
	h = heldLoopOf(c)
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, warning(newPub), h.tracker.Status().Warning)
	require.Equal(t, "weights one", weights())
}
