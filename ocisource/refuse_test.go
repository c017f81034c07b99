package ocisource_test

import (
	"archive/tar"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/ocisource"
	"github.com/tend-dev/tend/source"
)

const commitA = "0123456789abcdef0123456789abcdef01234567"

// What is not a usable fleet artifact is refused with what was found, and
// nothing of it is kept; a node that applied an artifact before holds it.
func TestFetchRefusesBadArtifacts(t *testing.T) {
	reg := testoci.Start(t)
	origin, applied := fleetRepo(t, "good", time.Now())
	ann := map[string]string{ocisource.AnnotationRevision: "main@sha1:" + commitA, ocisource.AnnotationCreated: time.Now().UTC().Format(time.RFC3339)}
	for _, tc := range []struct {
		name   string
		push   func(tag string)
		want   string
		target error
	}{
		{"missing tag", func(tag string) {}, "tag missing-tag not found in " + reg.Host + "/fleet", transport.ErrNotFound},
		{"wrong media type", func(tag string) {
			reg.PushFiles(t, "fleet:"+tag, map[string][]byte{"d.yaml": []byte("x")})
		}, "has config application/vnd.oci.empty.v1+json and 1 layer [application/octet-stream]; a fleet artifact has config " + ocisource.ConfigMediaType, ocisource.ErrNotFleet},
		{"two layers", func(tag string) {
			reg.Push(t, "fleet:"+tag, ocisource.ConfigMediaType, []byte("{}"), []testoci.Layer{
				{Data: tgz(t, file("a.yaml")), MediaType: ocisource.ContentMediaType}, {Data: tgz(t, file("b.yaml")), MediaType: ocisource.ContentMediaType}})
		}, "2 layers [" + ocisource.ContentMediaType + ", " + ocisource.ContentMediaType + "]", ocisource.ErrNotFleet},
		{"no commit in the revision", func(tag string) {
			pushFlux(t, reg, "fleet:"+tag, tgz(t, file("devices/cam-017/d.yaml")), map[string]string{ocisource.AnnotationRevision: "v1.2.3", ocisource.AnnotationCreated: ann[ocisource.AnnotationCreated]})
		}, `revision "v1.2.3" names no Git commit`, ocisource.ErrNotFleet},
		{"a created time that is no time", func(tag string) {
			pushFlux(t, reg, "fleet:"+tag, tgz(t, file("devices/cam-017/d.yaml")), map[string]string{ocisource.AnnotationRevision: ann[ocisource.AnnotationRevision],
				ocisource.AnnotationCreated: "\x1b[2J" + strings.Repeat("c", 40<<10)})
		}, `annotation org.opencontainers.image.created "\x1b[2Jccc`, ocisource.ErrNotFleet},
		{"a manifest of large annotations", func(tag string) {
			big := map[string]string{ocisource.AnnotationSource: strings.Repeat("s", ocisource.MaxManifestBytes)}
			for k, v := range ann {
				big[k] = v
			}
			pushFlux(t, reg, "fleet:"+tag, tgz(t, file("devices/cam-017/d.yaml")), big)
		}, "; a fleet artifact's manifest may be at most 65536 (64 KiB)", ocisource.ErrNotFleet},
		{"a path that climbs out", func(tag string) {
			pushFlux(t, reg, "fleet:"+tag, tgz(t, file("devices/cam-017/d.yaml"), file("../../escape.yaml")), ann)
		}, `"../../escape.yaml" climbs out of the folder`, extract.ErrUnsafeArchive},
		{"an absolute path", func(tag string) {
			pushFlux(t, reg, "fleet:"+tag, tgz(t, file("/etc/escape.yaml")), ann)
		}, `"/etc/escape.yaml" is absolute`, extract.ErrUnsafeArchive},
		{"a symlink out", func(tag string) {
			pushFlux(t, reg, "fleet:"+tag, tgz(t, &tar.Header{Name: "devices", Typeflag: tar.TypeSymlink, Linkname: "../../.."}), ann)
		}, `symlink "../../.." leaves the folder`, extract.ErrUnsafeArchive},
		{"a file through a symlink", func(tag string) {
			pushFlux(t, reg, "fleet:"+tag, tgz(t, &tar.Header{Name: "devices", Typeflag: tar.TypeSymlink, Linkname: "."}, file("devices/x/d.yaml")), ann)
		}, `parent "devices" is a symlink`, extract.ErrUnsafeArchive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tag := strings.ReplaceAll(tc.name, " ", "-")
			tc.push(tag)
			n := newNode(t, reg.Host, "fleet:"+tag)
			_, err := n.fetch(ocisource.Source{})
			require.ErrorIs(t, err, tc.target)
			require.ErrorContains(t, err, tc.want)
			require.Less(t, len(err.Error()), 1000, "the error does not repeat what the registry sent: %.300s", err)
			require.Empty(t, n.kept(t), "nothing of a refused artifact is kept")

			// A node that applied a good artifact holds it.
			good := newNode(t, reg.Host, "fleet:good-"+tag)
			publish(t, reg.Host, origin.Dir(), "main", "fleet:good-"+tag)
			_, err = good.fetch(ocisource.Source{})
			require.NoError(t, err)
			good.url = n.url
			snap, err := good.fetch(ocisource.Source{LastApplied: applied})
			require.NoError(t, err)
			require.ErrorIs(t, snap.Stale, tc.target)
			require.ErrorContains(t, snap.Stale, "holding the last applied commit "+applied[:12])
			require.Equal(t, applied, snap.Revision.Commit)
			require.Len(t, good.kept(t), 1)
		})
	}
}

// An artifact created before the applied one is a rewind: refused, and
// the applied one held, unless allowRewind.
func TestFetchRefusesARewind(t *testing.T) {
	reg := testoci.Start(t)
	origin, older := fleetRepo(t, "old", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	origin.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec: {}\n")
	newer := origin.CommitAt("newer", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")
	snap, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)
	require.Equal(t, newer, snap.Revision.Commit)

	publish(t, reg.Host, origin.Dir(), older, "fleet:main")
	snap, err = n.fetch(ocisource.Source{LastApplied: newer})
	require.NoError(t, err)
	require.ErrorIs(t, snap.Stale, source.ErrRewind)
	require.Equal(t, "holding the last applied commit "+newer[:12]+": target "+older[:12]+" of oci://"+reg.Host+"/fleet:main was created 2026-01-01T00:00:00Z, "+
		"before the last applied commit "+newer[:12]+" (created 2026-02-01T00:00:00Z): an older commit pushed to the tag; refusing to rewind; "+
		"set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it", snap.Stale.Error())
	require.Equal(t, newer, snap.Revision.Commit, "held")

	snap, err = n.fetch(ocisource.Source{LastApplied: newer, AllowRewind: true})
	require.NoError(t, err)
	require.Nil(t, snap.Stale)
	require.Equal(t, older, snap.Revision.Commit)
}

// A commit rolled back on this node is refused from an artifact too.
func TestFetchRefusesAQuarantinedCommit(t *testing.T) {
	reg := testoci.Start(t)
	origin, good := fleetRepo(t, "good", time.Now().Add(-time.Hour))
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")
	_, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)
	origin.WriteFile("devices/cam-017/d.yaml", "bad: [")
	bad := origin.Commit("bad")
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	snap, err := n.fetch(ocisource.Source{LastApplied: good, Quarantined: map[string]string{bad: "service/web did not become healthy"}})
	require.NoError(t, err)
	require.ErrorIs(t, snap.Stale, source.ErrQuarantined)
	require.Equal(t, "commit "+bad[:12]+" was rolled back on this node: service/web did not become healthy; push a fix as a new commit, or run tend retry to try this one again; holding the last applied commit "+good[:12], snap.Stale.Error())
	require.Equal(t, good, snap.Revision.Commit)
}

// A registry that does not answer holds the applied artifact, said to be
// unreachable; with nothing applied it is an error.
func TestFetchHoldsWhileTheRegistryIsUnreachable(t *testing.T) {
	reg := testoci.Start(t)
	origin, applied := fleetRepo(t, "good", time.Now())
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")
	_, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	n.url = "oci://" + dead + "/fleet:main"
	n.client = ocisource.NewClient(registryOptions(dead))
	// The artifact is kept by commit: the same from another registry.
	snap, err := n.fetch(ocisource.Source{LastApplied: applied})
	require.NoError(t, err)
	require.True(t, ocisource.Unreachable(snap.Stale), "%v", snap.Stale)
	require.ErrorContains(t, snap.Stale, "oci://"+dead+"/fleet:main is unreachable; holding the last applied commit "+applied[:12]+" from the artifact kept in stateDir")
	require.Equal(t, applied, snap.Revision.Commit)

	empty := newNode(t, dead, "fleet:main")
	_, err = empty.fetch(ocisource.Source{})
	require.True(t, ocisource.Unreachable(err), "%v", err)
}

// An artifact pushed by flux push artifact is read: its tar has a "./"
// entry first, and its revision may name no ref.
func TestFetchReadsFluxArtifacts(t *testing.T) {
	reg := testoci.Start(t)
	created := "2026-03-01T10:00:00Z"
	layer := tgz(t, &tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, &tar.Header{Name: "devices/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "devices/cam-017/", Typeflag: tar.TypeDir, Mode: 0o755}, file("devices/cam-017/d.yaml"))
	for _, tc := range []struct{ revision, ref string }{
		{"main@sha1:" + commitA, "main"},
		{"sha1:" + commitA, "flux"},
		{"main/" + commitA, "main"},
		{strings.ToUpper(commitA), "flux"},
	} {
		t.Run(tc.revision, func(t *testing.T) {
			pushFlux(t, reg, "fleet:flux", layer, map[string]string{ocisource.AnnotationRevision: tc.revision, ocisource.AnnotationCreated: created,
				ocisource.AnnotationSource: "https://github.com/acme/fleet"})
			n := newNode(t, reg.Host, "fleet:flux")
			snap, err := n.fetch(ocisource.Source{Paths: []source.Path{{Dir: "devices/cam-017", PerDevice: true}}})
			require.NoError(t, err)
			require.Equal(t, tc.ref, snap.Revision.Ref)
			require.Equal(t, commitA, snap.Revision.Commit)
			require.Equal(t, []string{"devices/cam-017/d.yaml"}, fileNames(snap))
		})
	}
}

// The paths of the device apply as to a commit: a missing shared path is
// an error, a missing per-device path is not while another holds files.
func TestFetchPaths(t *testing.T) {
	reg := testoci.Start(t)
	origin, _ := fleetRepo(t, "one", time.Now())
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")
	_, err := n.fetch(ocisource.Source{Paths: []source.Path{{Dir: "profile"}, {Dir: "devices/cam-017", PerDevice: true}}})
	require.ErrorIs(t, err, source.ErrSharedPathNotFound)
	require.ErrorContains(t, err, `source path "profile" not found in oci://`+reg.Host+"/fleet:main at ")
	snap, err := n.fetch(ocisource.Source{Paths: []source.Path{{Dir: "profiles"}, {Dir: "devices/cam-099", PerDevice: true}}})
	require.NoError(t, err)
	require.Equal(t, []string{"profiles/base.yaml"}, fileNames(snap))
	_, err = n.fetch(ocisource.Source{Paths: []source.Path{{Dir: "README.md"}}})
	require.True(t, errors.Is(err, source.ErrPathNotFound))
	require.ErrorContains(t, err, `path "README.md" is a file, not a folder`)
}

// The real registry server: publish, fetch, poll.
func TestDistribution(t *testing.T) {
	host := testoci.StartDistribution(t)
	inproc := testoci.Start(t)
	origin, commit := fleetRepo(t, "one", time.Now())
	pub := publish(t, host, origin.Dir(), "main", "fleet:main")
	require.Equal(t, publish(t, inproc.Host, origin.Dir(), "main", "fleet:main").Digest, pub.Digest, "the same artifact on any registry")
	n := newNode(t, host, "fleet:main")
	snap, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)
	require.Equal(t, commit, snap.Revision.Commit)
	snap, err = n.fetch(ocisource.Source{LastApplied: commit})
	require.NoError(t, err)
	require.False(t, snap.Fetched)
	n.url = "oci://" + host + "/fleet:nope"
	_, err = n.fetch(ocisource.Source{})
	require.ErrorIs(t, err, transport.ErrNotFound)
	require.ErrorContains(t, err, "tag nope not found in "+host+"/fleet; close tags: main")
}
