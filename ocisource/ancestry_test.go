package ocisource_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/ocisource"
	"github.com/tend-dev/tend/source"
)

// A descendant of the applied commit is taken whatever the committers'
// clocks said, as its artifact lists its ancestors: a child made on a
// clock two minutes behind, a merge (the applied commit its second
// parent) made on one further behind. An ancestor of the applied commit
// is refused even when its clock was ahead.
func TestFetchJudgesARewindByAncestry(t *testing.T) {
	reg := testoci.Start(t)
	now := time.Now().UTC().Truncate(time.Second)
	origin, base := fleetRepo(t, "base", now)
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")
	_, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)

	step := func(applied, want string) {
		t.Helper()
		snap, err := n.fetch(ocisource.Source{LastApplied: applied})
		require.NoError(t, err)
		require.NoError(t, snap.Stale)
		require.Equal(t, want, snap.Revision.Commit)
	}
	child := origin.CommitAt("child on a clock behind", now.Add(-2*time.Minute))
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	step(base, child)

	origin.Branch("feature")
	origin.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec: {}\n")
	feature := origin.CommitAt("feature", now)
	publish(t, reg.Host, origin.Dir(), "feature", "fleet:main")
	step(child, feature)

	origin.Checkout("main")
	origin.Git("merge", "--quiet", "--no-ff", "--no-commit", "feature")
	merge := origin.CommitAt("merge on a clock further behind", now.Add(-5*time.Minute))
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	step(feature, merge)

	// The feature commit again: created after the merge, but an ancestor.
	publish(t, reg.Host, origin.Dir(), "feature", "fleet:main")
	snap, err := n.fetch(ocisource.Source{LastApplied: merge})
	require.NoError(t, err)
	require.ErrorIs(t, snap.Stale, source.ErrRewind)
	require.ErrorContains(t, snap.Stale, "target "+feature[:12]+" of "+n.url+" is an ancestor of the last applied commit "+merge[:12]+": an older commit pushed to the tag; refusing to rewind")
	require.Equal(t, merge, snap.Revision.Commit, "held")
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	step(merge, merge)
}

// An artifact without the ancestors annotation (flux push artifact) is
// judged by its created time as before; a malformed list is refused.
func TestFetchJudgesFluxArtifactsByCreatedTime(t *testing.T) {
	reg := testoci.Start(t)
	now := time.Now().UTC().Truncate(time.Second)
	layer := tgz(t, file("devices/cam-017/d.yaml"), file("profiles/base.yaml"))
	const commitB = "1123456789abcdef0123456789abcdef01234567"
	flux := func(commit string, created time.Time, extra map[string]string) {
		ann := map[string]string{ocisource.AnnotationRevision: "main@sha1:" + commit, ocisource.AnnotationCreated: created.Format(time.RFC3339)}
		for k, v := range extra {
			ann[k] = v
		}
		pushFlux(t, reg, "fleet:main", layer, ann)
	}
	flux(commitA, now, nil)
	n := newNode(t, reg.Host, "fleet:main")
	_, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)

	flux(commitB, now.Add(-2*time.Minute), nil)
	snap, err := n.fetch(ocisource.Source{LastApplied: commitA})
	require.NoError(t, err)
	require.ErrorIs(t, snap.Stale, source.ErrRewind)
	require.ErrorContains(t, snap.Stale, "was created "+now.Add(-2*time.Minute).Format(time.RFC3339)+", before the last applied commit")

	flux(commitB, now.Add(-2*time.Minute), map[string]string{ocisource.AnnotationAncestors: commitA})
	snap, err = n.fetch(ocisource.Source{LastApplied: commitA})
	require.NoError(t, err)
	require.NoError(t, snap.Stale)
	require.Equal(t, commitB, snap.Revision.Commit)

	for _, bad := range []string{"main", commitA + ", " + commitB, strings.ToUpper(commitA), strings.TrimSuffix(strings.Repeat(commitA+",", ocisource.MaxAncestors+1), ",")} {
		flux(commitB, now, map[string]string{ocisource.AnnotationAncestors: bad})
		_, err = newNode(t, reg.Host, "fleet:main").fetch(ocisource.Source{})
		require.ErrorIs(t, err, ocisource.ErrNotFleet)
		require.ErrorContains(t, err, "annotation "+ocisource.AnnotationAncestors)
	}
}

// Publish lists at most MaxAncestors commits, nearest first, and as many
// as a shallow clone holds; the layer is the same from any clone.
func TestPublishListsAncestors(t *testing.T) {
	reg := testoci.Start(t)
	origin, _ := fleetRepo(t, "one", time.Now())
	var commits []string
	for i := 0; i < ocisource.MaxAncestors+5; i++ {
		commits = append(commits, origin.Commit("empty"))
	}
	publish(t, reg.Host, origin.Dir(), "main", "fleet:full")
	full := annotations(t, reg, "fleet:full")
	listed := strings.Split(full.Annotations[ocisource.AnnotationAncestors], ",")
	require.Len(t, listed, ocisource.MaxAncestors)
	require.Equal(t, commits[len(commits)-2], listed[0], "the parent first")
	require.Equal(t, commits[len(commits)-1-ocisource.MaxAncestors], listed[ocisource.MaxAncestors-1])

	shallow := filepath.Join(t.TempDir(), "shallow")
	origin.Git("clone", "--quiet", "--depth", "2", "file://"+origin.Dir(), shallow)
	publish(t, reg.Host, shallow, "HEAD", "fleet:shallow")
	m := annotations(t, reg, "fleet:shallow")
	require.Equal(t, strings.Join(listed[:2], ","), m.Annotations[ocisource.AnnotationAncestors], "as far as the clone holds history")
	require.Equal(t, full.Layers[0].Digest, m.Layers[0].Digest)
}

func fetchImage(reg *testoci.Registry, repoTag string) (v1.Image, error) {
	ref, err := name.ParseReference(reg.Ref(repoTag), name.Insecure)
	if err != nil {
		return nil, err
	}
	return remote.Image(ref)
}

func annotations(t *testing.T, reg *testoci.Registry, repoTag string) *v1.Manifest {
	t.Helper()
	ref, err := name.ParseReference(reg.Ref(repoTag), name.Insecure)
	require.NoError(t, err)
	desc, err := remote.Get(ref, remote.WithContext(context.Background()))
	require.NoError(t, err)
	var m v1.Manifest
	require.NoError(t, json.Unmarshal(desc.Manifest, &m))
	return &m
}
