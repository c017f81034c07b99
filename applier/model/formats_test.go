package model_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/internal/testkit/testnode"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// tarOf is an uncompressed tar of the files (name, body pairs), 0644.
func tarOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i < len(files); i += 2 {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: files[i], Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[i+1]))}))
		_, err := tw.Write([]byte(files[i+1]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return b.Bytes()
}

// modelPackRaw is a raw ModelPack layer (application/vnd.cncf.model.KIND.v1.raw)
// of one file, annotated as modctl annotates it: org.cncf.model.filepath,
// and org.cncf.model.file.metadata+json with its mode as a number.
func modelPackRaw(t *testing.T, kind, p string, mode fs.FileMode, body string) testoci.Layer {
	t.Helper()
	md, err := json.Marshal(map[string]any{"name": filepath.Base(p), "mode": uint32(mode), "uid": 0, "gid": 0,
		"size": len(body), "mtime": "2025-07-01T10:00:00Z", "typeflag": 0})
	require.NoError(t, err)
	return testoci.Layer{MediaType: "application/vnd.cncf.model." + kind + ".v1.raw", Data: []byte(body),
		Annotations: map[string]string{"org.cncf.model.filepath": p, "org.cncf.model.file.metadata+json": string(md)}}
}

// A ModelPack pushed as modctl pushes it (raw layers with file metadata,
// config application/vnd.cncf.model.config.v1+json, artifactType
// application/vnd.cncf.model.manifest.v1+json) keeps its files' modes
// under tend's policy: a service runs the model's run.sh, and its
// owner-only secret is not readable by others. The copies are verified
// as the links are: the next tick changes nothing.
func TestModelPackModesLetAServiceRunIt(t *testing.T) {
	n := newModelNode(t)
	config := []byte(`{"descriptor":{"name":"runner"},"config":{"format":"gguf"},"modelfs":{"type":"layers","diffIds":[]}}`)
	_, err := testoci.PushArtifact(n.reg.Host, "models/runner:v1", "application/vnd.cncf.model.manifest.v1+json",
		"application/vnd.cncf.model.config.v1+json", config, []testoci.Layer{
			modelPackRaw(t, "weight", "model.gguf", 0o644, "weights"),
			modelPackRaw(t, "code", "bin/run.sh", 0o755, "#!/bin/sh\necho ran with $(cat \"$(dirname \"$0\")/../model.gguf\")\nexec sleep 600\n"),
			modelPackRaw(t, "weight.config", "secrets/token", 0o600, "hf_secret"),
		})
	require.NoError(t, err)
	m := n.model("runner", "models/runner:v1")
	svc := manifest.Service{Name: "runner", Command: []string{"${model:runner}/bin/run.sh"}, StopTimeout: manifest.Duration(time.Second)}
	dev := n.Declare(manifest.DeviceSpec{Models: []manifest.Model{m}, Services: []manifest.Service{svc}})
	t.Cleanup(func() { testnode.StopServices(t, n.StateDir) })
	n.Reconcile(dev, "rev")

	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(service.LogFile(n.StateDir, "runner", 0))
		return strings.Contains(string(b), "ran with weights")
	}, 10*time.Second, 20*time.Millisecond, "the service did not run the model's run.sh")
	for p, want := range map[string]fs.FileMode{"bin/run.sh": 0o555, "secrets/token": 0o400, "model.gguf": 0o444} {
		fi, err := os.Stat(filepath.Join(n.Path(modelAllow), "runner", p))
		require.NoError(t, err)
		require.Equal(t, want, fi.Mode().Perm(), p)
	}

	cs, _ := n.Reconcile(dev, "rev")
	require.True(t, cs.Empty(), reasons(cs))
}

// A ModelKit's folder holds its Kitfile, as kit unpack writes it, so
// ${model:NAME}/Kitfile says which file is the model.
func TestModelKitKitfileAndBaseReference(t *testing.T) {
	n := newModelNode(t)
	const kit = "application/vnd.kitops.modelkit."
	// A ModelKit as kit pushes it: config application/vnd.kitops.modelkit.config.v1+json
	// (the Kitfile as JSON), layers application/vnd.kitops.modelkit.model.v1.tar
	// and docs.v1.tar, no artifactType.
	_, err := testoci.PushArtifact(n.reg.Host, "models/llm:v1", "", kit+"config.v1+json",
		[]byte(`{"manifestVersion":"1.0.0","package":{"name":"llm"},"model":{"name":"llm","path":"model.gguf","format":"gguf"},"docs":[{"path":"README.md"}]}`),
		[]testoci.Layer{
			{MediaType: kit + "model.v1.tar", Data: tarOf(t, "model.gguf", "weights")},
			{MediaType: kit + "docs.v1.tar", Data: tarOf(t, "README.md", "# llm\n")},
		})
	require.NoError(t, err)
	const kitfile = "manifestVersion: 1.0.0\npackage:\n  name: llm\nmodel:\n  name: llm\n  path: model.gguf\n  format: gguf\ndocs:\n  - path: README.md\n"
	m := n.model("llm", "models/llm:v1")
	n.apply(m)
	require.Equal(t, kitfile, n.read("llm", modelkit.KitfileName))
	require.Equal(t, "weights", n.read("llm", "model.gguf"))
	cs, _ := n.apply(m)
	require.True(t, cs.Empty(), reasons(cs))

	// A ModelKit whose model is that one (model.path a reference), in
	// another repository, with code of its own: its folder holds the
	// base's model, pulled from the base's repository and pinned by
	// digest, its own code and Kitfile, and not the base's docs.
	base := n.reg.Ref("models/base:v1")
	model := tarOf(t, "model.gguf", "base weights")
	_, err = testoci.PushArtifact(n.reg.Host, "models/base:v1", "", kit+"config.v1+json",
		[]byte(`{"manifestVersion":"1.0.0","package":{"name":"base"},"model":{"name":"base","path":"model.gguf"},"docs":[{"path":"README.md"}]}`),
		[]testoci.Layer{{MediaType: kit + "model.v1.tar", Data: model}, {MediaType: kit + "docs.v1.tar", Data: tarOf(t, "README.md", "# base\n")}})
	require.NoError(t, err)
	var mu sync.Mutex
	var gets []string
	n.reg.Use(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			mu.Lock()
			gets = append(gets, r.URL.Path)
			mu.Unlock()
		}
		return false
	})
	t.Cleanup(func() { n.reg.Use(nil) })
	tunedKitfile := `{"manifestVersion":"1.0.0","package":{"name":"llm-tuned"},"model":{"name":"llm-tuned","path":"` + base + `"},"code":[{"path":"src"}]}`
	_, err = testoci.PushArtifact(n.reg.Host, "models/tuned:v1", "", kit+"config.v1+json", []byte(tunedKitfile),
		[]testoci.Layer{{MediaType: kit + "code.v1.tar", Data: tarOf(t, "src/run.py", "print('tuned')")}})
	require.NoError(t, err)
	tuned := n.model("tuned", "models/tuned:v1")
	cs, _ = n.apply(m, tuned)
	require.Len(t, cs.Actions, 1)
	require.Regexp(t, `, base `+regexp.QuoteMeta(base)+` → sha256:[0-9a-f]{64}, `, cs.Actions[0].Reason)
	require.Equal(t, []string{modelkit.KitfileName, "model.gguf", "src/run.py"}, n.folder("tuned"))
	require.Equal(t, "base weights", n.read("tuned", "model.gguf"))
	require.Contains(t, n.read("tuned", modelkit.KitfileName), "path: "+base)
	mu.Lock()
	require.Contains(t, gets, "/v2/models/base/blobs/"+testoci.Digest(model), "the base's layer from the base's repository")
	require.Len(t, gets, 4, "the two manifests' configs, the base's model layer and the code layer: not the base's docs")
	mu.Unlock()
	cs, _ = n.apply(m, tuned)
	require.True(t, cs.Empty(), reasons(cs))

	// A base that cannot be read fails the tick, naming the reference;
	// the version before stays active.
	missing := n.reg.Ref("models/gone:v1")
	_, err = testoci.PushArtifact(n.reg.Host, "models/tuned:v2", "", kit+"config.v1+json",
		[]byte(`{"manifestVersion":"1.0.0","model":{"path":"`+missing+`"}}`), nil)
	require.NoError(t, err)
	_, _, _, err = n.tick(true, m, n.model("tuned", "models/tuned:v2"))
	require.ErrorIs(t, err, modelkit.ErrBaseModelKit)
	require.ErrorIs(t, err, transport.ErrNotFound)
	require.ErrorContains(t, err, "model/tuned")
	require.ErrorContains(t, err, "whose model is the ModelKit "+missing+" (model.path in its Kitfile)")
	require.Equal(t, []string{modelkit.KitfileName, "model.gguf", "src/run.py"}, n.folder("tuned"))
}
