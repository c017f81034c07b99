package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hub reads the whole fleet under each source path, up to its first
// placeholder, at one ref.
func TestFleetDirs(t *testing.T) {
	for paths, want := range map[string][]string{
		"path: fleet":                                 {"fleet"},
		"paths: ['devices/{device}', profiles]":       {"devices", "profiles"},
		"path: 'sites/{label:site}/devices/{device}'": {"sites"},
		"path: 'cam-{device}'":                        {""},
		"paths: [., 'fleet/x-{device}/y']":            {"", "fleet"},
	} {
		c, err := ParseConfig("agent.yaml", []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: https://git.example/fleet.git\n  "+paths+"\n"))
		require.NoError(t, err, paths)
		got, err := c.FleetDirs()
		require.NoError(t, err, paths)
		assert.Equal(t, want, got, paths)
	}
	c, err := ParseConfig("agent.yaml", []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: https://git.example/fleet.git\n  ref: '{label:ring}'\n"))
	require.NoError(t, err)
	_, err = c.FleetDirs()
	require.EqualError(t, err, `agent.yaml:5: source.ref: "{label:ring}" holds a placeholder: the hub reads the whole fleet at one ref; name it (main)`)
}

// Every Device document's labels and every Rollout, with the problems
// of the files by file and line.
func TestReadFleetLabels(t *testing.T) {
	fl, err := ReadFleetLabels([]Input{
		{Name: "r.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: all}\nspec: {selector: {}}\n")},
		{Name: "a.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: a, labels: {ring: canary}}\n")},
		{Name: "b.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: b}\n")},
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]map[string]string{"a": {"ring": "canary"}, "b": {}}, fl.Labels)
	require.Len(t, fl.Rollouts, 1)
	assert.Equal(t, "all", fl.Rollouts[0].Metadata.Name)

	_, err = ReadFleetLabels([]Input{{Name: "bad.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: x}\nspec: {selector: {}, waves: 3}\n")}})
	require.ErrorContains(t, err, "bad.yaml:4")
}
