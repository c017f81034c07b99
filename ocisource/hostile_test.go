package ocisource_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/ocisource"
	"github.com/tend-dev/tend/source"
)

// A registry that redirects a request to itself is left after
// MaxRedirects redirects with an error naming it and the loop, not
// followed until the timeout; a node that applied an artifact holds it.
func TestFetchStopsARedirectLoop(t *testing.T) {
	reg := testoci.Start(t)
	origin, applied := fleetRepo(t, "good", time.Now())
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")
	_, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)

	var heads atomic.Int64
	reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		heads.Add(1)
		http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := ocisource.Fetch(ctx, ocisource.Source{URL: n.url, Paths: paths, LastApplied: applied}, ocisource.Options{Dir: n.dir, Client: n.client})
	require.NoError(t, err)
	require.ErrorIs(t, snap.Stale, ocisource.ErrRedirectLoop)
	require.ErrorContains(t, snap.Stale, "registry "+reg.Host+" redirected HEAD http://"+reg.Host+"/v2/fleet/manifests/main more than 10 times (a redirect loop?)")
	require.Equal(t, applied, snap.Revision.Commit, "held")
	require.LessOrEqual(t, heads.Load(), int64(ocisource.MaxRedirects+1), "the loop is left after MaxRedirects")

	// With nothing applied, the error is returned, and publish stops too.
	fresh := newNode(t, reg.Host, "fleet:main")
	_, err = ocisource.Fetch(ctx, ocisource.Source{URL: fresh.url, Paths: paths}, ocisource.Options{Dir: fresh.dir, Client: fresh.client})
	require.ErrorIs(t, err, ocisource.ErrRedirectLoop)
	require.NoError(t, ctx.Err(), "not left by the timeout")
	_, err = ocisource.Publish(ctx, openRepo(t, origin.Dir()), "main", "oci://"+reg.Host+"/fleet:main", ocisource.PublishOptions{Registry: registryOptions(reg.Host)})
	require.ErrorIs(t, err, ocisource.ErrRedirectLoop)
	require.NoError(t, ctx.Err(), "not left by the timeout")
}

// Another artifact claiming the commit the node applied, with other
// content, is refused before its layer is downloaded, and the applied
// artifact held: applying it would change the node while its status
// still named the applied commit. The same tree republished under
// another ref (the same layer) is no change; allowRewind accepts either.
func TestFetchRefusesOtherContentForTheAppliedCommit(t *testing.T) {
	reg := testoci.Start(t)
	origin, applied := fleetRepo(t, "good", time.Now())
	pub := publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")
	_, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)

	// The same commit published under another ref: another digest, the
	// same layer.
	other, err := ocisource.Publish(context.Background(), openRepo(t, origin.Dir()), "main", "oci://"+reg.Host+"/fleet:main",
		ocisource.PublishOptions{Ref: "release", Registry: registryOptions(reg.Host)})
	require.NoError(t, err)
	require.NotEqual(t, pub.Digest, other.Digest)
	snap, err := n.fetch(ocisource.Source{LastApplied: applied})
	require.NoError(t, err)
	require.NoError(t, snap.Stale)
	require.Equal(t, source.Revision{Ref: "release", Commit: applied}, snap.Revision)

	evil := pushFlux(t, reg, "fleet:main", tgz(t, file("devices/cam-017/d.yaml"), file("profiles/base.yaml")),
		map[string]string{ocisource.AnnotationRevision: "main@sha1:" + applied, ocisource.AnnotationCreated: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	blobs := reg.BlobBytes.Load()
	snap, err = n.fetch(ocisource.Source{LastApplied: applied})
	require.NoError(t, err)
	require.ErrorIs(t, snap.Stale, source.ErrRewind)
	require.ErrorIs(t, snap.Stale, source.ErrRefused)
	require.ErrorContains(t, snap.Stale, "artifact "+evil+" of "+n.url+" claims commit "+applied[:12]+", which this node applied from artifact "+other.Digest+" with other content")
	require.Equal(t, applied, snap.Revision.Commit)
	require.Equal(t, fmt.Sprintf(deviceDoc, "good"), string(snap.Files[0].Data), "the applied content is held")
	require.Equal(t, blobs, reg.BlobBytes.Load(), "the refused layer is not downloaded")
	require.NotContains(t, n.kept(t), strings.Replace(evil, ":", "-", 1))

	snap, err = n.fetch(ocisource.Source{LastApplied: applied, AllowRewind: true})
	require.NoError(t, err)
	require.NoError(t, snap.Stale)
	require.Equal(t, fmt.Sprintf(deviceDoc, "from devices/cam-017/d.yaml"), string(snap.Files[0].Data), "allowRewind accepts it")
}

// An artifact refused for what its digest names (not a fleet artifact, an
// unsafe or too large layer) is not downloaded again while the tag names
// it: the next fetch is one manifest HEAD and reports the same error. A
// new push to the tag is fetched.
func TestFetchRemembersARefusedArtifact(t *testing.T) {
	reg := testoci.Start(t)
	origin, _ := fleetRepo(t, "good", time.Now())
	ann := map[string]string{ocisource.AnnotationRevision: "main@sha1:" + commitA, ocisource.AnnotationCreated: time.Now().UTC().Format(time.RFC3339)}
	for _, tc := range []struct {
		name  string
		push  func(tag string)
		blobs bool // whether the first fetch downloads the layer
	}{
		{"not a fleet artifact", func(tag string) {
			reg.PushFiles(t, "fleet:"+tag, map[string][]byte{"d.yaml": []byte("x")})
		}, false},
		{"no commit in the revision", func(tag string) {
			pushFlux(t, reg, "fleet:"+tag, tgz(t, file("devices/cam-017/d.yaml")), map[string]string{ocisource.AnnotationRevision: "v1", ocisource.AnnotationCreated: ann[ocisource.AnnotationCreated]})
		}, false},
		{"an unsafe layer", func(tag string) {
			pushFlux(t, reg, "fleet:"+tag, tgz(t, file("devices/cam-017/d.yaml"), file("../../escape.yaml")), ann)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tag := strings.ReplaceAll(tc.name, " ", "-")
			tc.push(tag)
			n := newNode(t, reg.Host, "fleet:"+tag)
			c := count(reg)
			_, first := n.fetch(ocisource.Source{})
			require.Error(t, first)
			require.Equal(t, int64(1), c.manifestGets.Load())
			require.Equal(t, tc.blobs, c.blobGets.Load() > 0)

			c = count(reg)
			_, again := n.fetch(ocisource.Source{})
			require.EqualError(t, again, first.Error(), "the same error")
			require.Equal(t, int64(1), c.manifestHeads.Load())
			require.Equal(t, int64(1), c.all.Load(), "one manifest HEAD, nothing downloaded")

			publish(t, reg.Host, origin.Dir(), "main", "fleet:"+tag)
			snap, err := n.fetch(ocisource.Source{})
			require.NoError(t, err)
			require.True(t, snap.Fetched)
		})
	}
}
