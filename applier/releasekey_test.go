package applier

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// keyFleet renders a device of one model (ref and digest), one container
// service (image digest) and one file (content) at commit.
func keyFleet(commit, ref, model, image, content string) *render.Desired {
	m := render.Model{Name: "detector", Ref: ref, Policy: ">=1.0.0", Digest: model, Tag: "1.0.0"}
	web := render.Service{Name: "web", Kind: render.KindContainer, Image: "r/web:stable", ImageDigest: image, ImageTag: "stable",
		Hash: "spec-" + image, Declared: "spec-declared"}
	d := &render.Desired{Desired: planner.Desired{Device: "cam-1", Revision: "main@sha1:" + commit, Resources: []planner.Resource{
		{ID: "model/detector", Kind: planner.KindModel, Fields: render.ModelFields(model, nil)},
		{ID: "file/etc/infer.conf", Kind: planner.KindFile, Fields: []planner.Field{{Name: planner.FieldContent, Value: content}}},
		{ID: "service/web", Kind: planner.KindService, Fields: []planner.Field{{Name: planner.FieldSpec, Value: web.Hash}, {Name: planner.FieldImage, Value: image}}},
	}}, Specs: map[string]any{"model/detector": m, "service/web": web, "file/etc/infer.conf": render.File{Path: "/etc/infer.conf"}}}
	return d
}

// applied is the inventory of a node that applied d in full.
func applied(d *render.Desired, release api.ReleaseKey, declaration bool) *Inventory {
	inv := &Inventory{Device: d.Device, Revision: d.Revision, Release: release, Resources: map[string]InventoryEntry{}}
	if declaration {
		inv.Declaration = d.Declaration()
	}
	for _, r := range d.Resources {
		inv.Resources[r.ID] = InventoryEntry{Fields: slices.Clone(r.Fields)}
	}
	return inv
}

func TestReleaseOf(t *testing.T) {
	c1, c2 := strings.Repeat("1", 40), strings.Repeat("2", 40)
	m1, m2 := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	i1, i2 := "sha256:"+strings.Repeat("c", 64), "sha256:"+strings.Repeat("d", 64)
	base := keyFleet(c1, "r/detector", m1, i1, "v1")
	inv := applied(base, "commit:"+api.ReleaseKey(c1), true)
	for _, tc := range []struct {
		name string
		inv  *Inventory
		d    *render.Desired
		want api.ReleaseKey
	}{
		{"nothing applied: the commit", &Inventory{Resources: map[string]InventoryEntry{}}, base, api.CommitRelease(c1)},
		{"nothing changes", inv, base, ""},
		{"a commit that changes nothing on the device", inv, keyFleet(c2, "r/detector", m1, i1, "v1"), ""},
		{"a tag moved at the applied commit", inv, keyFleet(c1, "r/detector", m2, i1, "v1"), api.ReleaseKey("model/detector@" + m2)},
		{"a tag moved, and an unrelated commit", inv, keyFleet(c2, "r/detector", m2, i1, "v1"), api.ReleaseKey("model/detector@" + m2)},
		{"a model and an image moved", inv, keyFleet(c2, "r/detector", m2, i2, "v1"),
			api.ReleaseKey("model/detector@" + m2 + "+service/web@" + i2)},
		{"an image moved", inv, keyFleet(c1, "r/detector", m1, i2, "v1"), api.ReleaseKey("service/web@" + i2)},
		{"a commit that changes a file, and a tag moved", inv, keyFleet(c2, "r/detector", m2, i1, "v2"), api.CommitRelease(c2)},
		{"a commit that changes the model's ref", inv, keyFleet(c2, "r/other", m2, i1, "v1"), api.CommitRelease(c2)},
		{"an inventory that keeps no declaration: any new commit", applied(base, "", false), keyFleet(c2, "r/detector", m2, i1, "v1"), api.CommitRelease(c2)},
		{"an inventory that keeps no declaration, at its commit", applied(base, "", false), keyFleet(c1, "r/detector", m2, i1, "v1"),
			api.ReleaseKey("model/detector@" + m2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ReleaseOf(tc.inv, tc.d))
		})
	}

	t.Run("at the applied commit, what a failed apply left is no release", func(t *testing.T) {
		d := keyFleet(c1, "r/detector", m1, i1, "v1")
		d.Resources = d.Resources[:2] // the service's entry stays, its declaration went with a failed apply
		require.Equal(t, api.ReleaseKey(""), ReleaseOf(inv, d), "the running commit is never its own new release")
		require.Equal(t, api.ReleaseKey("model/detector@"+m2), ReleaseOf(inv, keyFleet(c1, "r/other", m2, i1, "v1")))
	})
	t.Run("a release left part way keeps its key while what is left is part of it", func(t *testing.T) {
		both := api.ReleaseKey("model/detector@" + m2 + "+service/web@" + i2)
		half := applied(keyFleet(c1, "r/detector", m2, i1, "v1"), "commit:"+api.ReleaseKey(c1), true) // the model applied, the image failed
		half.Pending = both
		require.Equal(t, both, ReleaseOf(half, keyFleet(c1, "r/detector", m2, i2, "v1")))
		i3 := "sha256:" + strings.Repeat("e", 64)
		require.Equal(t, api.ReleaseKey("service/web@"+i3), ReleaseOf(half, keyFleet(c1, "r/detector", m2, i3, "v1")),
			"a digest the pending release does not name is a release of its own")
		require.Equal(t, api.CommitRelease(c2), ReleaseOf(half, keyFleet(c2, "r/detector", m2, i2, "v2")))
	})
	t.Run("a removed resource is the commit's", func(t *testing.T) {
		d := keyFleet(c2, "r/detector", m1, i1, "v1")
		d.Resources = d.Resources[:2]
		require.Equal(t, api.CommitRelease(c2), ReleaseOf(inv, d))
	})
	t.Run("the applied release of an older inventory is its commit's", func(t *testing.T) {
		require.Equal(t, api.CommitRelease(c1), applied(base, "", false).AppliedRelease())
		require.Equal(t, api.ReleaseKey("model/detector@"+m2), applied(base, api.ReleaseKey("model/detector@"+m2), true).AppliedRelease())
		require.Equal(t, api.ReleaseKey(""), (&Inventory{}).AppliedRelease())
	})
}

// A release is quarantined by the parts of its key that its plan
// reached: the commit's hash, or each digest applied before the failure.
func TestReleaseKeysQuarantineTheKeysParts(t *testing.T) {
	c1, c2 := strings.Repeat("1", 40), strings.Repeat("2", 40)
	m1, m2 := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	i1, i2 := "sha256:"+strings.Repeat("c", 64), "sha256:"+strings.Repeat("d", 64)
	inv := applied(keyFleet(c1, "r/detector", m1, i1, "v1"), "", true)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	both := keyFleet(c2, "r/detector", m2, i2, "v1")
	got := releaseKeys(inv, both, []string{"model/detector"}, "unhealthy", at)
	require.Equal(t, []Keyed{{Key: "model/detector@" + m2, Quarantined: Quarantined{Revision: "model/detector@" + m2, Tag: "1.0.0",
		Applied: both.Revision, Reason: "unhealthy", At: at}}}, got, "only the digest its plan reached; the unrelated commit is no part of it")
	got = releaseKeys(inv, both, []string{"model/detector", "service/web"}, "unhealthy", at)
	require.Len(t, got, 2)
	require.Equal(t, "service/web@"+i2, got[1].Key)
	require.Equal(t, "stable", got[1].Tag)

	file := keyFleet(c2, "r/detector", m2, i1, "v2")
	got = releaseKeys(inv, file, []string{"model/detector"}, "unhealthy", at)
	require.Equal(t, []Keyed{{Key: c2, Quarantined: Quarantined{Revision: file.Revision, Reason: "unhealthy", At: at}}}, got)

	require.Empty(t, releaseKeys(inv, keyFleet(c1, "r/detector", m1, i1, "v1"), []string{"service/web"}, "unhealthy", at),
		"a restart after drift quarantines nothing")
}
