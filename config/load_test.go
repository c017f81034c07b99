package config

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
		c, err := Load(path, Overrides{})
		require.NoError(t, err)
		require.Equal(t, "cam-017", c.Device)
		require.Equal(t, "", c.Source.Ref, "no ref: the remote's HEAD")
		require.Equal(t, manifest.DefaultSchedule, c.Schedule)
		_, p, err := c.ExpandSource()
		require.NoError(t, err)
		require.Equal(t, []manifest.SourcePath{{Pattern: "devices/{label:site}/{device}", Dir: "devices/plant-a/cam-017"}}, p)
	})
	t.Run("--path given several times sets source.paths in place of source.path", func(t *testing.T) {
		c, err := Load(path, Overrides{Paths: []string{"profiles", "devices/{device}"}})
		require.NoError(t, err)
		require.Equal(t, "", c.Source.Path)
		_, p, err := c.ExpandSource()
		require.NoError(t, err)
		require.Equal(t, []manifest.SourcePath{{Pattern: "profiles", Dir: "profiles"}, {Pattern: "devices/{device}", Dir: "devices/cam-017"}}, p)
	})
	t.Run("--path once sets source.path", func(t *testing.T) {
		c, err := Load(path, Overrides{Paths: []string{"devices/{label:zone}"}})
		require.ErrorContains(t, err, `--path (source.path): "devices/{label:zone}" uses {label:zone} but the agent has no label "zone"`)
		require.Nil(t, c)
	})
	t.Run("flags override the file", func(t *testing.T) {
		c, err := Load(path, Overrides{Device: ptr("cam-018"), StateDir: ptr("rel/state"), AllowPaths: []string{"/opt/models"}, AllowEmpty: ptr(true)})
		require.NoError(t, err)
		require.Equal(t, "cam-018", c.Device)
		wd, _ := os.Getwd()
		require.Equal(t, filepath.Join(wd, "rel/state"), c.StateDir, "a relative --state-dir is taken from the working directory")
		require.Equal(t, []string{"/opt/models"}, c.AllowPaths)
		require.True(t, c.AllowEmpty)
	})
	t.Run("an explicit config that is missing is an error", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope.yaml"), Overrides{Repo: ptr("/x")})
		require.ErrorContains(t, err, "nope.yaml")
	})
	t.Run("an invalid flag is named as the flag", func(t *testing.T) {
		_, err := Load(path, Overrides{Schedule: ptr("sometimes")})
		require.ErrorContains(t, err, `--schedule (schedule): invalid schedule "sometimes"`)
		require.NotContains(t, err.Error(), "agent.yaml")
	})
	t.Run("--max-rate caps every registry download", func(t *testing.T) {
		c, err := Load(path, Overrides{})
		require.NoError(t, err)
		require.Zero(t, RegistryOptions(c).MaxRate, "no cap by default")
		rate, err := manifest.ParseRate("2MiB/s")
		require.NoError(t, err)
		c, err = Load(path, Overrides{MaxRate: &rate})
		require.NoError(t, err)
		require.Equal(t, int64(2<<20), RegistryOptions(c).MaxRate.BytesPerSecond())
	})
	t.Run("an invalid field is named with its file and line", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		require.NoError(t, os.WriteFile(bad, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /x}\nschedule: sometimes\nallowPaths: [/ok, etc]\n"), 0o644))
		_, err := Load(bad, Overrides{})
		require.ErrorContains(t, err, `bad.yaml:4: schedule: invalid schedule "sometimes"`)
		require.ErrorContains(t, err, `bad.yaml:5: allowPaths[1]: "etc" must be an absolute, clean path`)
	})
	t.Run("a relative repo path is relative to the config file", func(t *testing.T) {
		rel := filepath.Join(dir, "rel.yaml")
		require.NoError(t, os.WriteFile(rel, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: fleet}\n"), 0o644))
		c, err := Load(rel, Overrides{})
		require.NoError(t, err)
		require.Equal(t, filepath.Join(dir, "fleet"), c.Source.URL)
	})
}

// The example config documents every field: it must stay valid.
func TestExampleConfigIsValid(t *testing.T) {
	c, err := Load("../examples/agent.yaml", Overrides{})
	require.NoError(t, err)
	require.Equal(t, "demo-01", c.Device)
	require.Equal(t, 2, *c.Models.KeepVersions)
}

func TestOverridesOfModelsRegistriesAndRewind(t *testing.T) {
	c, err := Load("", Overrides{Repo: ptr("/x"), Device: ptr("cam-017"), KeepVersions: ptr(0),
		DockerConfig: ptr("/etc/tend/docker.json"), AllowRewind: ptr(true)})
	require.NoError(t, err)
	require.Equal(t, 0, *c.Models.KeepVersions)
	require.Equal(t, "/etc/tend/docker.json", c.Registries.DockerConfig)
	require.True(t, c.Source.AllowRewind)

	_, err = Load("", Overrides{Repo: ptr("/x"), Device: ptr("cam-017"), KeepVersions: ptr(-1)})
	require.ErrorContains(t, err, "--keep-versions (models.keepVersions): -1 is negative")
}

// The commands that work on the node's state alone need no source.
func TestLoadNodeConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nlisten: \"off\"\n"), 0o644))
	c, err := LoadNode(path, Overrides{})
	require.NoError(t, err)
	require.Equal(t, manifest.DefaultStateDir, c.StateDir)
	require.Equal(t, "off", c.Listen)

	require.NoError(t, os.WriteFile(path, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nstateDir: state\n"), 0o644))
	_, err = LoadNode(path, Overrides{})
	require.ErrorContains(t, err, `agent.yaml:3: stateDir: "state" is relative`)
}
