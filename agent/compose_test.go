package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// A tick whose commit did not move reuses the last composition; a label
// moved in the agent config, or a new commit, composes again.
func TestCompositionIsReusedWhileItsInputsAreTheSame(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("profiles/orin.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: orin}\nspec:\n"+
		"  selector: {matchLabels: {hw: orin}}\n  files:\n    - {path: /etc/infer/orin, content: \"${device}\"}\n")
	repo.WriteFile("profiles/all.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: all}\nspec:\n"+
		"  selector: {}\n  files:\n    - {path: /etc/infer/all, content: all}\n")
	repo.Commit("profiles")
	c := newConfig(t, repo.Dir())
	c.Source.Path, c.Source.Paths = "", []string{"profiles", "devices/{device}"}
	c.Labels = map[string]string{"hw": "orin"}
	r := &Reconciler{Config: c}

	first, err := r.Apply(context.Background())
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(c.Root, "etc/infer/orin"))
	second, err := r.Apply(context.Background())
	require.NoError(t, err)
	require.Same(t, first.Composed, second.Composed, "the same commit and config compose the same")

	c.Labels = map[string]string{"hw": "x86"}
	third, err := r.Apply(context.Background())
	require.NoError(t, err)
	require.NotSame(t, second.Composed, third.Composed)
	_, err = os.Stat(filepath.Join(c.Root, "etc/infer/orin"))
	require.ErrorIs(t, err, os.ErrNotExist, "what the orin profile brought is pruned")
	require.FileExists(t, filepath.Join(c.Root, "etc/infer/all"))

	repo.WriteFile("profiles/all.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: all}\nspec:\n"+
		"  selector: {}\n  files:\n    - {path: /etc/infer/all, content: changed}\n")
	repo.Commit("all changed")
	fourth, err := r.Apply(context.Background())
	require.NoError(t, err)
	require.NotSame(t, third.Composed, fourth.Composed)
	b, err := os.ReadFile(filepath.Join(c.Root, "etc/infer/all"))
	require.NoError(t, err)
	require.Equal(t, "changed", string(b))
}
