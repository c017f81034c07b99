package model_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Resolution passes over the digests quarantined for a model on this node:
// a semver policy takes the highest tag whose digest is not, a plain tag
// that moved to one keeps the active digest, and nothing left with
// nothing active holds the model; each says why.
func TestModelResolutionSkipsQuarantined(t *testing.T) {
	at := time.Date(2026, 12, 3, 7, 51, 1, 0, time.UTC)
	quarantine := func(n *modelNode, name, tag, digest string) string {
		key := applier.ReleaseKey(planner.ModelID(name), digest)
		require.NoError(t, applier.Quarantine(n.StateDir, key, applier.Quarantined{Revision: key, Tag: tag, Reason: "service/web did not become healthy", At: at}))
		short := planner.ShortDigest(digest)
		return "model/" + name + " " + tag + " (" + short + ") was rolled back on this node at 2026-12-03T07:51:01Z: service/web did not become healthy; " +
			"push a new version, or run tend retry model/" + name + "@" + short
	}

	t.Run("semver takes the highest tag not quarantined", func(t *testing.T) {
		n := newModelNode(t)
		n.reg.PushFiles(t, "models/m:1.0.0", map[string][]byte{"m.bin": []byte("one")})
		n.reg.PushFiles(t, "models/m:1.1.0", map[string][]byte{"m.bin": []byte("one-one")})
		bad := n.reg.PushFiles(t, "models/m:1.2.0", map[string][]byte{"m.bin": []byte("bad")})
		n.reg.Tag(t, "models/m:1.2.0", "v1.2.0") // the same digest under a second tag
		why := quarantine(n, "m", "v1.2.0", bad) // the tag resolution passed over first
		m := manifest.Model{Name: "m", Ref: n.reg.Ref("models/m"), Path: modelAllow + "/m", Policy: &manifest.Policy{Semver: ">=1.0.0"}}
		cs, _ := n.apply(m)
		require.Contains(t, cs.Actions[0].Reason, ":1.1.0 → sha256:")
		require.Equal(t, "one-one", n.read("m", "m.bin"))
		cs, _, d, err := n.tick(false, m)
		require.NoError(t, err)
		require.True(t, cs.Empty(), reasons(cs))
		require.EqualError(t, d.Quarantined, why)
		require.Equal(t, why, d.Document().Spec.Models[0].Quarantined)
	})

	t.Run("a moved tag keeps the active digest", func(t *testing.T) {
		n := newModelNode(t)
		n.reg.PushFiles(t, "models/m:v1", map[string][]byte{"m.bin": []byte("one")})
		m := n.model("m", "models/m:v1")
		n.apply(m)
		bad := n.reg.PushFiles(t, "models/m:v1", map[string][]byte{"m.bin": []byte("bad")})
		why := quarantine(n, "m", "v1", bad)
		cs, _ := n.apply(m)
		require.True(t, cs.Empty(), reasons(cs))
		require.Equal(t, "one", n.read("m", "m.bin"))
		_, _, d, err := n.tick(false, m)
		require.NoError(t, err)
		require.EqualError(t, d.Quarantined, why)
		require.Nil(t, d.Held)
	})

	t.Run("nothing left and nothing active holds the model", func(t *testing.T) {
		n := newModelNode(t)
		bad := n.reg.PushFiles(t, "models/m:v1", map[string][]byte{"m.bin": []byte("bad")})
		why := quarantine(n, "m", "v1", bad)
		_, _, d, err := n.tick(false, n.model("m", "models/m:v1"))
		require.NoError(t, err)
		require.EqualError(t, d.Quarantined, why)
		require.ErrorContains(t, d.Held, why)
	})

	t.Run("another model's quarantine is not this one's", func(t *testing.T) {
		n := newModelNode(t)
		d1 := n.reg.PushFiles(t, "models/m:v1", map[string][]byte{"m.bin": []byte("same")})
		quarantine(n, "other", "v1", d1)
		cs, _ := n.apply(n.model("m", "models/m:v1"))
		require.Len(t, cs.Actions, 1)
		require.Equal(t, "same", n.read("m", "m.bin"))
	})
}
