package applier_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/render"
)

func TestObserveRejectsCorruptInventory(t *testing.T) {
	n := newNode(t)
	require.NoError(t, os.MkdirAll(n.stateDir, 0o700))
	require.NoError(t, os.WriteFile(statedir.Dir(n.stateDir).Inventory(), []byte("{"), 0o600))
	a, _ := n.Open()
	d, err := render.Render(t.Context(), device(config), "rev1", render.Options{Root: n.root, StateDir: n.stateDir})
	require.NoError(t, err)
	_, err = a.Observe(t.Context(), d)
	require.ErrorIs(t, err, applier.ErrCorruptInventory)
}
