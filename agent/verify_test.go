package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testcosign"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/ocisource"
)

// publishDigest publishes the fleet and returns the artifact's digest.
func publishDigest(t *testing.T, reg *testoci.Registry, repo *testgit.Repo) string {
	t.Helper()
	r, err := git.PlainOpen(repo.Dir())
	require.NoError(t, err)
	p, err := ocisource.Publish(context.Background(), r, "main", "oci://"+reg.Ref("fleet:main"), ocisource.PublishOptions{Registry: transport.Options{Insecure: []string{reg.Host}}})
	require.NoError(t, err)
	return p.Digest
}

// A device whose source.verify asks for a cosign key applies a fleet
// artifact signed by the real cosign CLI, holds its last applied commit
// while the newest artifact is unsigned (signed by another key, or by
// nobody), and takes it once it is signed. A poll that finds the digest
// it verified sends no request more than without verification.
func TestOCISourceSigned(t *testing.T) {
	cosign := testcosign.New(t)
	priv, pub := cosign.KeyPair("release")
	otherPriv, _ := cosign.KeyPair("other")
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "one"))
	repo.CommitAt("one", time.Now().Add(-time.Hour))
	one := publishDigest(t, reg, repo)
	cosign.Sign(priv, reg.Ref("fleet@"+one))

	c := newConfig(t, "oci://"+reg.Ref("fleet:main"))
	c.Registries.Insecure = []string{reg.Host}
	c.Source.Verify = &manifest.Verify{Cosign: &manifest.CosignVerify{Keys: []string{pub}}}
	require.NoError(t, c.Validate())
	h := heldLoopOf(c)
	h.r.OnVerify(h.metrics.Verified)

	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "one", h.file(t))

	var all atomic.Int64
	reg.Use(func(_ http.ResponseWriter, r *http.Request) bool {
		all.Add(1)
		return false
	})
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, int64(1), all.Load(), "a no-op poll is one manifest HEAD, as without verification")

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "two"))
	repo.Commit("two")
	two := publishDigest(t, reg, repo)
	cosign.Sign(otherPriv, reg.Ref("fleet@"+two))
	h.scheduled()
	require.Error(t, h.err)
	require.Contains(t, h.err.Error(), "fleet artifact oci://"+reg.Ref("fleet:main")+" refused: "+reg.Ref("fleet")+"@"+two+": no cosign signature by "+pub+" (found 1 signature by another key)")
	require.Equal(t, "one", h.file(t), "the node keeps its state")

	cosign.Sign(priv, reg.Ref("fleet@"+two))
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "two", h.file(t))

	got := scrape(t, h.metrics)
	require.Equal(t, 2.0, got[`tend_verify_total{kind="source",result="ok"}`])
	require.Equal(t, 1.0, got[`tend_verify_total{kind="source",result="failed"}`])
	require.True(t, strings.HasPrefix(two, "sha256:"))
}

// A device whose models.verify asks for a cosign key pulls a model signed
// by the real cosign CLI; when its tag is pushed again with other
// weights, unsigned, the model is held at the version it has, the tick
// says which digest failed which requirement, and the drift of other
// resources is still reverted. Ticks that find nothing new ask the
// registry for no signature.
func TestModelSigned(t *testing.T) {
	cosign := testcosign.New(t)
	priv, pub := cosign.KeyPair("release")
	reg := testoci.Start(t)
	v1 := reg.PushFiles(t, "models/m:v1", map[string][]byte{"w.bin": []byte("weights one")})
	cosign.Sign(priv, reg.Ref("models/m@"+v1))

	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good")+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v1")+"}\n")
	repo.Commit("good")
	h := newHeldLoop(t, repo)
	h.r.Config.Registries.Insecure = []string{reg.Host}
	h.r.Config.Models.Verify = &manifest.ArtifactVerify{Cosign: &manifest.CosignVerify{Keys: []string{pub}}}
	require.NoError(t, h.r.Config.Validate())
	h.r.OnVerify(h.metrics.Verified)
	weights := func() string {
		b, err := os.ReadFile(filepath.Join(h.r.Config.StateDir, "models/m/current/w.bin"))
		require.NoError(t, err)
		return string(b)
	}

	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "weights one", weights())
	asked := h.r.verifier().Requests()
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, asked, h.r.verifier().Requests(), "a no-op tick asks for no signature")

	v1b := reg.PushFiles(t, "models/m:v1", map[string][]byte{"w.bin": []byte("poisoned")})
	file := filepath.Join(h.r.Config.Root, "etc/infer/a")
	require.NoError(t, os.WriteFile(file, []byte("edited by hand"), 0o644))
	h.scheduled()
	require.Error(t, h.err)
	require.Contains(t, h.err.Error(), "model/m "+reg.Ref("models/m")+"@"+v1b+": no cosign signature by "+pub+" (found no cosign signature of this digest)")
	require.Equal(t, "weights one", weights(), "the model is held at the version it has")
	require.Equal(t, "good", h.file(t), "drift of the rest is reverted")
	require.Contains(t, h.tracker.Status().LastError, "no cosign signature by "+pub)

	got := scrape(t, h.metrics)
	require.Equal(t, 1.0, got[`tend_verify_total{kind="model",result="ok"}`])
	require.Equal(t, 1.0, got[`tend_verify_total{kind="model",result="failed"}`])
}

// A container service's image must carry the signature runtime.verify
// asks for, and those its own verify adds, before it is pulled: the plan
// holds the service otherwise, naming the image's digest and what was
// found. (Planning needs no engine: the image is resolved in its
// registry.)
func TestImageSigned(t *testing.T) {
	cosign := testcosign.New(t)
	priv, pub := cosign.KeyPair("release")
	_, otherPub := cosign.KeyPair("other")
	reg := testoci.Start(t)
	v1 := reg.PushFiles(t, "app:v1", map[string][]byte{"bin": []byte("app one")})
	cosign.Sign(priv, reg.Ref("app@"+v1))
	v2 := reg.PushFiles(t, "app:v2", map[string][]byte{"bin": []byte("app two")})

	for _, tc := range []struct {
		name, tag, own string
		held           string // "" when the plan takes the image
	}{
		{"signed", "v1", "", ""},
		{"unsigned", "v2", "", "service/web " + reg.Ref("app") + "@" + v2 + ": no cosign signature by " + pub + " (found no cosign signature of this digest)"},
		{"signed, but not by the key the service adds", "v1", "\n      verify: {cosign: {keys: [" + otherPub + "]}}",
			"service/web " + reg.Ref("app") + "@" + v1 + ": no cosign signature by " + otherPub + " (found 1 signature by another key)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := testgit.NewRepo(t)
			repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good")+
				"  services:\n    - name: web\n      image: "+reg.Ref("app:"+tc.tag)+tc.own+"\n")
			repo.Commit("one")
			c := newConfig(t, repo.Dir())
			c.Registries.Insecure = []string{reg.Host}
			c.Runtime.Verify = &manifest.ArtifactVerify{Cosign: &manifest.CosignVerify{Keys: []string{pub}}}
			require.NoError(t, c.Validate())
			r := &Reconciler{Config: c}
			res, err := r.Plan(context.Background())
			if tc.held == "" {
				require.NoError(t, err)
				require.NoError(t, res.Desired.Held)
				return
			}
			require.Error(t, err)
			require.ErrorContains(t, res.Desired.Held, tc.held)
		})
	}
}

// A signed ModelKit whose model is a base ModelKit is applied only when
// the base is signed too: the weights come from the base.
func TestModelBaseSigned(t *testing.T) {
	cosign := testcosign.New(t)
	priv, pub := cosign.KeyPair("release")
	reg := testoci.Start(t)
	const kit = "application/vnd.kitops.modelkit."
	tarOf := func(name, body string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
		require.NoError(t, tw.Close())
		return b.Bytes()
	}
	base, err := testoci.PushArtifact(reg.Host, "models/base:v1", "", kit+"config.v1+json",
		[]byte(`{"manifestVersion":"1.0.0","package":{"name":"base"},"model":{"name":"base","path":"model.gguf"}}`),
		[]testoci.Layer{{MediaType: kit + "model.v1.tar", Data: tarOf("model.gguf", "base weights")}})
	require.NoError(t, err)
	tuned, err := testoci.PushArtifact(reg.Host, "models/tuned:v1", "", kit+"config.v1+json",
		[]byte(`{"manifestVersion":"1.0.0","package":{"name":"tuned"},"model":{"name":"tuned","path":"`+reg.Ref("models/base:v1")+`"},"code":[{"path":"src"}]}`),
		[]testoci.Layer{{MediaType: kit + "code.v1.tar", Data: tarOf("src/run.py", "print('tuned')")}})
	require.NoError(t, err)
	cosign.Sign(priv, reg.Ref("models/tuned@"+tuned))

	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good")+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/tuned:v1")+"}\n")
	repo.Commit("good")
	h := newHeldLoop(t, repo)
	h.r.Config.Registries.Insecure = []string{reg.Host}
	h.r.Config.Models.Verify = &manifest.ArtifactVerify{Cosign: &manifest.CosignVerify{Keys: []string{pub}}}
	require.NoError(t, h.r.Config.Validate())
	weights := filepath.Join(h.r.Config.StateDir, "models/m/current/model.gguf")

	h.scheduled()
	require.Error(t, h.err)
	require.Contains(t, h.err.Error(), "base ModelKit "+reg.Ref("models/base:v1")+": model/m base "+reg.Ref("models/base:v1")+" "+reg.Ref("models/base")+"@"+base+": no cosign signature by "+pub)
	require.NoFileExists(t, weights, "an unsigned base's weights are not applied")

	cosign.Sign(priv, reg.Ref("models/base@"+base))
	h.res, h.err = nil, nil
	h.tick(context.Background(), slog.New(slog.DiscardHandler), true) // tend apply by hand: no backoff
	require.NoError(t, h.err)
	b, err := os.ReadFile(weights)
	require.NoError(t, err)
	require.Equal(t, "base weights", string(b))
}
