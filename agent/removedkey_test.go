package agent

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	reg, v1, release, pubs := signedModel(t, "new")
	oldPub, newPub := pubs["old"], pubs["new"]
	read := func(path string) []byte { return readFile(t, path) }

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

// The version a node runs is checked again only when verify changed
// since it was last checked, or a back-off allows: a model pinned by a
// digest in the store needs no registry to run, so when its registry
// is gone (an air-gapped device) the look-up that fails is not tried
// again by the next ticks, but after 1 minute, then 2 (each counted
// once in tend_verify_total), and a key file rewritten meanwhile has it
// asked at once.
func TestRecheckWhileRegistryGone(t *testing.T) {
	reg, v1, release, pubs := signedModel(t, "new", "third")
	newPub, thirdPub := pubs["new"], pubs["third"]
	read := func(path string) []byte { return readFile(t, path) }

	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good")+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m@"+v1)+"}\n")
	repo.Commit("good")
	c := newConfig(t, repo.Dir())
	c.Registries.Insecure = []string{reg.Host}
	c.Models.Verify = &manifest.ArtifactVerify{Cosign: &manifest.CosignVerify{Keys: []string{release}}}
	require.NoError(t, c.Validate())
	h := heldLoopOf(c)
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	h.r.Now = func() time.Time { return now }
	h.r.OnVerify(h.metrics.Verified)
	failed := func() float64 { return scrape(t, h.metrics)[`tend_verify_total{kind="model",result="failed"}`] }

	h.scheduled()
	require.NoError(t, h.err)
	require.Empty(t, h.tracker.Status().Warning)

	reg.Use(func(http.ResponseWriter, *http.Request) bool { panic(http.ErrAbortHandler) })
	require.NoError(t, os.WriteFile(release, read(newPub), 0o644))
	asked := reg.Requests.Load()
	h.scheduled()
	require.NoError(t, h.err, "the model runs from the store")
	require.Greater(t, reg.Requests.Load(), asked, "a changed key file has the running version checked")
	require.Empty(t, h.tracker.Status().Warning, "nothing is known of its signatures")
	require.Equal(t, 1.0, failed())

	for _, step := range []struct {
		after time.Duration
		asks  bool
	}{
		{0, false},
		{59 * time.Second, false},
		{time.Second, true}, // 1 minute after the failure
		{time.Minute, false},
		{time.Minute, true}, // 2 minutes after the second
	} {
		now = now.Add(step.after)
		asked, before := reg.Requests.Load(), failed()
		h.scheduled()
		require.NoError(t, h.err)
		if !step.asks {
			require.Equal(t, asked, reg.Requests.Load(), "at %s, within the back-off, the registry is not asked", now.Format(time.TimeOnly))
			require.Equal(t, before, failed())
			continue
		}
		require.Greater(t, reg.Requests.Load(), asked, "at %s, past the back-off, the registry is asked again", now.Format(time.TimeOnly))
		require.Equal(t, before+1, failed())
	}

	// The registry is back, within the back-off; the key file rewritten
	// has the running version checked at once.
	reg.Use(nil)
	now = now.Add(time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.Empty(t, h.tracker.Status().Warning, "still within the back-off")
	require.NoError(t, os.WriteFile(release, read(thirdPub), 0o644))
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "model/m runs "+reg.Ref("models/m")+"@"+v1+", which no longer verifies: no cosign signature by "+release+
		" (found 1 signature by another key); it keeps running, and a new version must verify", h.tracker.Status().Warning)
}

// signedModel pushes models/m:v1 (w.bin, "weights one") to a registry,
// signs it with a new key "old", and writes that key's public half to
// release.pub, the file a verify names; it makes a key pair for each of
// more too. pubs holds every public half by name.
func signedModel(t *testing.T, more ...string) (reg *testoci.Registry, v1, release string, pubs map[string]string) {
	t.Helper()
	cosign := testcosign.New(t)
	oldPriv, oldPub := cosign.KeyPair("old")
	pubs = map[string]string{"old": oldPub}
	for _, name := range more {
		_, pubs[name] = cosign.KeyPair(name)
	}
	reg = testoci.Start(t)
	v1 = reg.PushFiles(t, "models/m:v1", map[string][]byte{"w.bin": []byte("weights one")})
	cosign.Sign(oldPriv, reg.Ref("models/m@"+v1))
	release = filepath.Join(t.TempDir(), "release.pub")
	require.NoError(t, os.WriteFile(release, readFile(t, oldPub), 0o644))
	return reg, v1, release, pubs
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
