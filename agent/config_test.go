package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tend-dev/tend/manifest"
)

func ptr[T any](v T) *T { return &v }

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: tend.dev/v1alpha1
kind: AgentConfig
device: cam-017
labels: {site: plant-a}
source: {url: https://git.example.com/fleet.git, path: "devices/{label:site}/{device}"}
stateDir: /var/lib/tend
allowPaths: [/etc/infer]
`), 0o644))

	t.Run("file and defaults", func(t *testing.T) {
		c, err := LoadConfig(path, Overrides{})
		require.NoError(t, err)
		require.Equal(t, "cam-017", c.Device)
		require.Equal(t, manifest.DefaultRef, c.Source.Ref)
		require.Equal(t, manifest.DefaultSchedule, c.Schedule)
		_, p, err := c.ExpandSource()
		require.NoError(t, err)
		require.Equal(t, "devices/plant-a/cam-017", p)
	})
	t.Run("flags override the file", func(t *testing.T) {
		c, err := LoadConfig(path, Overrides{Device: ptr("cam-018"), StateDir: ptr("rel/state"), AllowPaths: []string{"/opt/models"}, AllowEmpty: ptr(true)})
		require.NoError(t, err)
		require.Equal(t, "cam-018", c.Device)
		wd, _ := os.Getwd()
		require.Equal(t, filepath.Join(wd, "rel/state"), c.StateDir, "a relative --state-dir is taken from the working directory")
		require.Equal(t, []string{"/opt/models"}, c.AllowPaths)
		require.True(t, c.AllowEmpty)
	})
	t.Run("an explicit config that is missing is an error", func(t *testing.T) {
		_, err := LoadConfig(filepath.Join(dir, "nope.yaml"), Overrides{Repo: ptr("/x")})
		require.ErrorContains(t, err, "nope.yaml")
	})
	t.Run("invalid result names the field", func(t *testing.T) {
		_, err := LoadConfig(path, Overrides{Schedule: ptr("sometimes")})
		require.ErrorContains(t, err, `agent.yaml: schedule: invalid schedule "sometimes"`)
	})
}
