package ocisource_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/ocisource"
	"github.com/tend-dev/tend/source"
)

const deviceDoc = "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: /etc/infer/a, content: %q}\n"

var paths = []source.Path{{Dir: "profiles"}, {Dir: "devices/cam-017", PerDevice: true}}

// fleetRepo is a fleet repo whose first commit was made at when.
func fleetRepo(t *testing.T, content string, when time.Time) (*testgit.Repo, string) {
	t.Helper()
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(deviceDoc, content))
	r.WriteFile("profiles/base.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: base}\nspec: {}\n")
	r.WriteFile("README.md", "the fleet\n")
	return r, r.CommitAt("first", when)
}

func openRepo(t testing.TB, dir string) *git.Repository {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	require.NoError(t, err)
	return repo
}

func registryOptions(host string) transport.Options {
	return transport.Options{Insecure: []string{host}}
}

func publish(t *testing.T, host, dir, rev, repoTag string) *ocisource.Published {
	t.Helper()
	pub, err := ocisource.Publish(context.Background(), openRepo(t, dir), rev, "oci://"+host+"/"+repoTag, ocisource.PublishOptions{Registry: registryOptions(host)})
	require.NoError(t, err)
	return pub
}

// node is one device's copy of the source: its client and folder.
type node struct {
	client *ocisource.Client
	dir    string
	url    string
}

func newNode(t *testing.T, host, repoTag string) *node {
	return &node{client: ocisource.NewClient(registryOptions(host)), dir: filepath.Join(t.TempDir(), "oci"), url: "oci://" + host + "/" + repoTag}
}

func (n *node) fetch(src ocisource.Source) (*source.Snapshot, error) {
	src.URL = n.url
	if src.Paths == nil {
		src.Paths = paths
	}
	return ocisource.Fetch(context.Background(), src, ocisource.Options{Dir: n.dir, Client: n.client})
}

// kept lists the artifacts kept in the node's folder.
func (n *node) kept(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(n.dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.Name() == "blobs" {
			// Layers download there; none is left once unpacked.
			layers, err := os.ReadDir(filepath.Join(n.dir, "blobs", "sha256"))
			require.NoError(t, err)
			require.Empty(t, layers, "a layer left after its unpack")
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

func fileNames(s *source.Snapshot) []string {
	var out []string
	for _, f := range s.Files {
		out = append(out, f.Path)
	}
	return out
}

// requests counts what the registry is asked, by kind.
type requests struct{ all, manifestHeads, manifestGets, blobGets atomic.Int64 }

func count(reg *testoci.Registry) *requests {
	c := &requests{}
	reg.Use(func(_ http.ResponseWriter, r *http.Request) bool {
		c.all.Add(1)
		switch {
		case r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/"):
			c.manifestHeads.Add(1)
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/"):
			c.manifestGets.Add(1)
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/"):
			c.blobGets.Add(1)
		}
		return false
	})
	return c
}

func TestPublishIsReproducible(t *testing.T) {
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	origin, parent := fleetRepo(t, "one", when)
	origin.WriteFile("bin/run.sh", "#!/bin/sh\n")
	require.NoError(t, os.Chmod(filepath.Join(origin.Dir(), "bin/run.sh"), 0o755))
	require.NoError(t, os.Symlink("../README.md", filepath.Join(origin.Dir(), "bin/readme")))
	commit := origin.CommitAt("with a script and a symlink", when)
	clones := make([]string, 2)
	for i := range clones {
		clones[i] = filepath.Join(t.TempDir(), "clone")
		origin.Git("clone", "--quiet", origin.Dir(), clones[i])
	}
	reg := testoci.Start(t)
	first := publish(t, reg.Host, clones[0], "main", "fleet:a")
	again := publish(t, reg.Host, clones[0], "main", "fleet:b")
	other := publish(t, reg.Host, clones[1], "HEAD", "fleet:c")
	require.Equal(t, first.Digest, again.Digest, "the same commit published twice")
	require.Equal(t, first.Digest, other.Digest, "the same commit published from another clone")
	require.Equal(t, "main@sha1:"+commit, first.Revision)

	ref, err := name.ParseReference(reg.Ref("fleet:a"), name.Insecure)
	require.NoError(t, err)
	desc, err := remote.Get(ref)
	require.NoError(t, err)
	require.Equal(t, first.Digest, desc.Digest.String())
	var m v1.Manifest
	require.NoError(t, json.Unmarshal(desc.Manifest, &m))
	require.EqualValues(t, "application/vnd.oci.image.manifest.v1+json", m.MediaType)
	require.EqualValues(t, ocisource.ConfigMediaType, m.Config.MediaType)
	require.Len(t, m.Layers, 1)
	require.EqualValues(t, ocisource.ContentMediaType, m.Layers[0].MediaType)
	require.Equal(t, map[string]string{
		ocisource.AnnotationRevision:  "main@sha1:" + commit,
		ocisource.AnnotationCreated:   "2026-01-02T02:04:05Z",
		ocisource.AnnotationSource:    origin.Dir(),
		ocisource.AnnotationAncestors: parent,
	}, m.Annotations)

	// The layer: sorted entries, no times, no owners, the executable bit,
	// no symlink.
	img, err := desc.Image()
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, fmt.Sprintf("%s %o", h.Name, h.Mode))
		require.Equal(t, int64(0), h.ModTime.Unix(), h.Name)
		require.Zero(t, h.Uid, h.Name)
		require.Zero(t, h.Gid, h.Name)
		require.Empty(t, h.Uname+h.Gname, h.Name)
	}
	require.Equal(t, []string{"README.md 644", "bin/ 755", "bin/run.sh 755", "devices/ 755", "devices/cam-017/ 755",
		"devices/cam-017/d.yaml 644", "profiles/ 755", "profiles/base.yaml 644"}, names)
	require.True(t, sort.StringsAreSorted(names))
}

func TestPublishRefusesBadTargets(t *testing.T) {
	origin, _ := fleetRepo(t, "one", time.Now())
	repo := openRepo(t, origin.Dir())
	for _, tc := range []struct{ rev, target, want string }{
		{"main", "registry.local/fleet:main", "not an oci:// URL"},
		{"main", "oci://registry.local/fleet@sha256:" + strings.Repeat("0", 64), "oci://HOST/REPO:TAG"},
		{"nope", "oci://registry.local/fleet:main", `revision "nope"`},
	} {
		_, err := ocisource.Publish(context.Background(), repo, tc.rev, tc.target, ocisource.PublishOptions{})
		require.ErrorContains(t, err, tc.want)
	}
}

// A device polls with one manifest HEAD and downloads only when the
// digest changed; what it reads is the files of its paths, as from Git.
func TestFetchPollsWithOneHead(t *testing.T) {
	origin, first := fleetRepo(t, "one", time.Now().Add(-time.Hour))
	reg := testoci.Start(t)
	pub := publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")

	snap, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)
	require.True(t, snap.Fetched)
	require.Nil(t, snap.Stale)
	require.Equal(t, "main", snap.Revision.Ref)
	require.Equal(t, first, snap.Revision.Commit)
	require.Equal(t, []string{"devices/cam-017/d.yaml", "profiles/base.yaml"}, fileNames(snap))
	require.Equal(t, fmt.Sprintf(deviceDoc, "one"), string(snap.Files[0].Data))
	require.True(t, snap.Files[0].PerDevice)
	require.False(t, snap.Files[1].PerDevice)

	c := count(reg)
	snap, err = n.fetch(ocisource.Source{LastApplied: first})
	require.NoError(t, err)
	require.False(t, snap.Fetched)
	require.Equal(t, first, snap.Revision.Commit)
	require.Equal(t, int64(1), c.manifestHeads.Load())
	require.Equal(t, int64(0), c.blobGets.Load())
	require.Equal(t, int64(1), c.all.Load(), "a poll is one request: the registry session is kept")

	// A new publish is fetched, and once applied the older one is removed.
	origin.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(deviceDoc, "two"))
	second := origin.Commit("second")
	pub2 := publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	require.NotEqual(t, pub.Digest, pub2.Digest)
	snap, err = n.fetch(ocisource.Source{LastApplied: first})
	require.NoError(t, err)
	require.True(t, snap.Fetched)
	require.Equal(t, second, snap.Revision.Commit)
	require.Equal(t, fmt.Sprintf(deviceDoc, "two"), string(snap.Files[0].Data))
	require.Len(t, n.kept(t), 2, "the applied artifact is kept for a hold")
	_, err = n.fetch(ocisource.Source{LastApplied: second})
	require.NoError(t, err)
	require.Equal(t, []string{strings.Replace(pub2.Digest, ":", "-", 1)}, n.kept(t))

	// The applied revision is read with no registry.
	reg.Use(func(w http.ResponseWriter, _ *http.Request) bool { panic("no request expected") })
	held, err := ocisource.Applied(n.dir, n.url, second, paths)
	require.NoError(t, err)
	require.Equal(t, second, held.Revision.Commit)
	require.Equal(t, fmt.Sprintf(deviceDoc, "two"), string(held.Files[0].Data))
}

// A digest URL needs no request at all once its artifact is kept.
func TestFetchByDigest(t *testing.T) {
	origin, commit := fleetRepo(t, "one", time.Now())
	reg := testoci.Start(t)
	pub := publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet@"+pub.Digest)
	snap, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)
	require.Equal(t, commit, snap.Revision.Commit)
	c := count(reg)
	snap, err = n.fetch(ocisource.Source{LastApplied: commit})
	require.NoError(t, err)
	require.False(t, snap.Fetched)
	require.Zero(t, c.all.Load())
}

// tgz packs entries as a gzipped tar.
func tgz(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = fmt.Sprintf(deviceDoc, "from "+h.Name)
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func file(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg} }

// pushFlux pushes a layer as flux push artifact lays it out, with
// annotations.
func pushFlux(t *testing.T, reg *testoci.Registry, repoTag string, layer []byte, ann map[string]string) string {
	t.Helper()
	return pushManifest(t, reg, repoTag, ocisource.ConfigMediaType, ocisource.ContentMediaType, layer, ann)
}

func pushManifest(t *testing.T, reg *testoci.Registry, repoTag, configType, layerType string, layer []byte, ann map[string]string) string {
	t.Helper()
	config := []byte(`{"architecture":"","created":"2026-01-01T00:00:00Z","os":"","rootfs":{"type":"layers","diff_ids":[]},"config":{}}`)
	ref, err := name.ParseReference(reg.Ref(repoTag), name.Insecure)
	require.NoError(t, err)
	for _, blob := range []struct {
		data []byte
		mt   string
	}{{config, configType}, {layer, layerType}} {
		require.NoError(t, remote.WriteLayer(ref.Context(), static.NewLayer(blob.data, types.MediaType(blob.mt))))
	}
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": configType, "digest": testoci.Digest(config), "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": layerType, "digest": testoci.Digest(layer), "size": len(layer)}},
		"annotations":   ann,
	}
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, reg.URL+"/v2/"+ref.Context().RepositoryStr()+"/manifests/"+ref.Identifier(), bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	return testoci.Digest(raw)
}
