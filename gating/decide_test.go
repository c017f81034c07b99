package gating

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
)

// device is a Device with one file of content %s.
const device = "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n" +
	"  files:\n    - {path: /etc/infer/a, content: %s}\n"

// target is the input of a Decide whose target puts content in the file,
// under rollout (a Rollout document, or ""), on a node that applied
// applied ("" for nothing yet).
func target(t *testing.T, content, ro, applied string) Input {
	t.Helper()
	c := &manifest.AgentConfig{Device: "cam-017", Root: t.TempDir(), StateDir: t.TempDir()}
	render1 := func(content, commit string) (*manifest.Composed, *source.Snapshot, *render.Desired) {
		inputs := []manifest.Input{{Name: "devices/cam-017/d.yaml", Data: []byte(fmt.Sprintf(device, content))}}
		if ro != "" {
			inputs = append(inputs, manifest.Input{Name: "devices/cam-017/rollout.yaml", Data: []byte(ro)})
		}
		comp, err := manifest.Compose(inputs, manifest.ComposeOptions{Device: c.Device})
		require.NoError(t, err)
		rev, err := source.ParseRevision("main@sha1:" + strings.Repeat(commit, 40))
		require.NoError(t, err)
		d, err := render.Render(context.Background(), comp.Device, rev.String(), render.Options{Root: c.Root, StateDir: c.StateDir, Resolver: render.Declared{}})
		require.NoError(t, err)
		return comp, &source.Snapshot{Revision: rev}, d
	}
	comp, snap, d := render1(content, "b")
	inv := &applier.Inventory{Device: c.Device, Root: c.Root, Resources: map[string]applier.InventoryEntry{}}
	if applied != "" {
		_, old, od := render1(applied, "a")
		inv.Revision, inv.Declaration = old.Revision.String(), od.Declaration()
		for _, r := range od.Resources {
			inv.Resources[r.ID] = applier.InventoryEntry{Fields: r.Fields, Created: true}
		}
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	return Input{Config: c, Composed: comp, Snapshot: snap, Desired: d, Inventory: inv, Record: true,
		Now: func() time.Time { return now }}
}

const (
	paused    = "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec: {selector: {}, paused: true}\n"
	onRelease = "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec: {selector: {}, paused: true, stage: onRelease}\n"
)

// Decide's one answer: take, hold (and why) or stage, and what the
// tick's stager does, for each kind of target a tick meets.
func TestDecide(t *testing.T) {
	for _, tt := range []struct {
		name             string
		content, applied string
		rollout          string
		stages, download bool
		verdict          Verdict
		cause            string // of a Hold
		stager           StagerAction
		first, seen      bool
	}{
		{name: "a release, no rollout", content: "v2", applied: "v1", verdict: Take},
		{name: "a paused rollout holds", content: "v2", applied: "v1", rollout: paused,
			verdict: Hold, cause: rollout.CausePaused, seen: true},
		{name: "no release is taken whatever the rollout", content: "v1", applied: "v1", rollout: paused,
			verdict: Take, seen: true},
		{name: "staged while held, onSight", content: "v2", applied: "v1", rollout: paused, stages: true, download: true,
			verdict: Hold, cause: rollout.CausePaused, stager: StartStaging, seen: true},
		{name: "not staged while held, onRelease", content: "v2", applied: "v1", rollout: onRelease, stages: true, download: true,
			verdict: Hold, cause: rollout.CausePaused, stager: ForgetStaging, seen: true},
		{name: "staged and held: kept", content: "v2", applied: "v1", rollout: paused, stages: true,
			verdict: Hold, cause: rollout.CausePaused, stager: KeepStaged, seen: true},
		{name: "taken once staged", content: "v2", applied: "v1", stages: true, download: true,
			verdict: Stage, stager: StartStaging, seen: true},
		{name: "taken, nothing to download", content: "v2", applied: "v1", stages: true,
			verdict: Take, stager: ForgetStaging, seen: true},
		{name: "a first commit stages", content: "v1", stages: true, download: true,
			verdict: Stage, stager: StartStaging, first: true, seen: true},
		{name: "a first commit with nothing to download", content: "v1", stages: true,
			verdict: Take, stager: ForgetStaging, first: true, seen: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := target(t, tt.content, tt.rollout, tt.applied)
			in.Stages, in.Download = tt.stages, tt.download
			var g Decider
			d, err := g.Decide(context.Background(), in)
			require.NoError(t, err)
			require.Equal(t, tt.verdict, d.Verdict)
			require.Equal(t, tt.stager, d.Stager)
			require.Equal(t, tt.first, d.First)
			require.Equal(t, tt.seen, d.Seen)
			if tt.applied != tt.content {
				require.Equal(t, "commit:"+strings.Repeat("b", 40), d.Release.String())
			}
			if tt.rollout != "" {
				require.Equal(t, 0, *d.Wave)
				require.Equal(t, "r", d.Rollout)
			} else {
				require.Nil(t, d.Wave)
			}
			if tt.verdict != Hold {
				require.Nil(t, d.Held)
				return
			}
			require.Equal(t, &Held{Revision: in.Snapshot.Revision.String(), Resources: []string{"file/etc/infer/a"},
				Cause: tt.cause, Reason: "held: rollout paused", Wave: 0, FirstSeen: in.Now()}, d.Held)
		})
	}
}
