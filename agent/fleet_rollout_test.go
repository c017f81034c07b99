package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/rollout"
)

// A fleet of ten devices in one process, each deciding by itself, with a
// three-wave rollout and an injected clock: the canaries take a release at
// once, the 10% wave an hour after they saw it, the rest a day after; a
// commit that pauses the rollout stops the devices that have not taken it
// and leaves those that have.
func TestFleetRolloutInWaves(t *testing.T) {
	repo := testgit.NewRepo(t)
	profile := func(v string) string {
		return "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: all}\nspec:\n  selector: {}\n" +
			"  files:\n    - {path: /etc/infer/model, content: " + v + "}\n"
	}
	rolloutDoc := func(paused bool) string {
		return fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n  paused: %v\n"+
			"  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 10, after: 1h}\n    - {percent: 100, after: 24h}\n", paused)
	}
	repo.WriteFile("profiles/all.yaml", profile("v1"))
	repo.WriteFile("profiles/rollout.yaml", rolloutDoc(false))
	repo.Commit("v1")

	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	type device struct {
		name string
		wave int
		loop *heldLoop
	}
	var fleet []*device
	waves := map[int]int{}
	// Two canaries, two devices whose bucket is under 10 and six others.
	var names []string
	low, high := 0, 0
	for i := 0; len(names) < 10; i++ {
		name := fmt.Sprintf("cam-%03d", i)
		switch {
		case len(names) < 2:
		case rollout.Bucket(name) < 10 && low < 2:
			low++
		case rollout.Bucket(name) >= 10 && high < 6:
			high++
		default:
			continue
		}
		names = append(names, name)
	}
	for i, name := range names {
		d := &device{name: name}
		c := newConfig(t, repo.Dir())
		c.Device = d.name
		c.Source.Path, c.Source.Paths = "", []string{"profiles", "devices/{device}"}
		c.Labels = map[string]string{}
		switch {
		case i < 2:
			c.Labels["ring"] = "canary"
			d.wave = 0
		case rollout.Bucket(d.name) < 10:
			d.wave = 1
		default:
			d.wave = 2
		}
		waves[d.wave]++
		h := &heldLoop{}
		h.Loop = NewLoop(&Reconciler{Config: c, Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)},
			LoopOptions{Schedule: everyTick(time.Hour), OnTick: func(r *Result, err error) { h.res, h.err = r, err }})
		h.tracker, h.metrics, h.observed = status.NewTracker(c.Device, "test"), status.NewMetrics(), make(chan struct{})
		d.loop = h
		fleet = append(fleet, d)
	}
	require.Equal(t, map[int]int{0: 2, 1: 2, 2: 6}, waves)
	content := func(d *device) string {
		b, err := os.ReadFile(filepath.Join(d.loop.r.Config.Root, "etc/infer/model"))
		require.NoError(t, err)
		return string(b)
	}
	tickAll := func() {
		for _, d := range fleet {
			d.loop.res, d.loop.err = nil, nil
			d.loop.tick(context.Background(), slog.New(slog.DiscardHandler), false)
			require.NoError(t, d.loop.err, d.name)
		}
	}
	took := func(v string) (n map[int]int) {
		n = map[int]int{}
		for _, d := range fleet {
			if content(d) == v {
				n[d.wave]++
			}
		}
		return n
	}

	tickAll()
	require.Equal(t, map[int]int{0: 2, 1: waves[1], 2: waves[2]}, took("v1"), "the first commit is taken at once")

	repo.WriteFile("profiles/all.yaml", profile("v2"))
	repo.Commit("v2")
	tickAll()
	require.Equal(t, map[int]int{0: 2}, took("v2"), "canaries at once")
	for _, d := range fleet[2:] {
		require.Contains(t, d.loop.res.Held.Reason, "held: rollout wave")
	}

	now = now.Add(time.Hour)
	tickAll()
	require.Equal(t, map[int]int{0: 2, 1: waves[1]}, took("v2"), "the 10% wave an hour later")

	repo.WriteFile("profiles/rollout.yaml", rolloutDoc(true))
	repo.Commit("pause the rollout")
	now = now.Add(24 * time.Hour)
	tickAll()
	require.Equal(t, map[int]int{0: 2, 1: waves[1]}, took("v2"), "paused: the rest waits, the others keep v2")
	for _, d := range fleet {
		if d.wave == 2 {
			require.Equal(t, "held: rollout paused", d.loop.res.Held.Reason, d.name)
		}
	}

	repo.WriteFile("profiles/rollout.yaml", rolloutDoc(false))
	repo.Commit("resume")
	tickAll()
	require.Equal(t, map[int]int{0: 2, 1: waves[1], 2: waves[2]}, took("v2"), "resumed, a day after they saw it: everyone")
}

// A model followed by a semver policy is released by waves too: a new
// tag pushed to the registry, at the same commit, reaches the canary at
// once; a device in a later wave keeps its applied digest (and says
// which model waits) until its wave opens.
func TestSemverModelRollsOutByWaves(t *testing.T) {
	reg := testoci.Start(t)
	v1 := reg.PushFiles(t, "models/m:1.0.0", map[string][]byte{"model.onnx": []byte("one")})
	repo := testgit.NewRepo(t)
	repo.WriteFile("profiles/all.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: all}\nspec:\n  selector: {}\n"+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m")+", policy: {semver: \">=1.0.0\"}}\n")
	repo.WriteFile("profiles/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n"+
		"  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100, after: 1h}\n")
	commit := repo.Commit("follow m by semver")

	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	var fleet []*heldLoop
	for i, name := range []string{"cam-001", "cam-002", "cam-003"} {
		c := newConfig(t, repo.Dir())
		c.Device = name
		c.Source.Path, c.Source.Paths = "", []string{"profiles", "devices/{device}"}
		c.Registries.Insecure = []string{reg.Host}
		c.Labels = map[string]string{}
		if i == 0 {
			c.Labels["ring"] = "canary"
		}
		h := &heldLoop{}
		h.Loop = NewLoop(&Reconciler{Config: c, Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)},
			LoopOptions{Schedule: everyTick(time.Hour), OnTick: func(r *Result, err error) { h.res, h.err = r, err }})
		h.tracker, h.metrics, h.observed = status.NewTracker(c.Device, "test"), status.NewMetrics(), make(chan struct{})
		fleet = append(fleet, h)
	}
	model := func(h *heldLoop) string {
		b, err := os.ReadFile(filepath.Join(h.r.Config.StateDir, "models", "m", "current", "model.onnx"))
		require.NoError(t, err)
		return string(b)
	}
	tickAll := func() {
		for _, h := range fleet {
			h.res, h.err = nil, nil
			h.tick(context.Background(), slog.New(slog.DiscardHandler), false)
			require.NoError(t, h.err, h.r.Config.Device)
		}
	}
	tickAll()
	for _, h := range fleet {
		require.Equal(t, "one", model(h), "the first release is taken at once")
	}

	v2 := reg.PushFiles(t, "models/m:1.1.0", map[string][]byte{"model.onnx": []byte("two")})
	require.NotEqual(t, v1, v2)
	tickAll()
	require.Equal(t, "two", model(fleet[0]), "the canary takes the new tag at once")
	for _, h := range fleet[1:] {
		require.Equal(t, "one", model(h), "%s keeps its applied digest", h.r.Config.Device)
		require.NotNil(t, h.res.Held, h.r.Config.Device)
		require.Equal(t, "held: rollout wave 1 opens 2026-12-03T10:00Z", h.res.Held.Reason)
		require.Equal(t, []string{"model/m"}, h.res.Held.Resources)
		require.Equal(t, "HEAD@sha1:"+commit, h.res.Held.Revision, "the same commit: the release is the digest")
		st := h.tracker.Status()
		require.Equal(t, status.ResultHeld, st.Result)
		require.Equal(t, 1.0, scrape(t, h.metrics)[`tend_release_held{reason="wave"}`])
	}

	now = now.Add(time.Hour)
	tickAll()
	for _, h := range fleet {
		require.Equal(t, "two", model(h), "%s: the wave opened", h.r.Config.Device)
		require.Nil(t, h.res.Held)
	}
}
