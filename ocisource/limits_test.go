package ocisource_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/ocisource"
)

// Publish refuses, before pushing, a tree every device would refuse:
// one that unpacks to more than MaxUnpackedBytes (measured by path before
// a file is read: here one 1 MiB blob at 520 paths, which Git stores
// once), and a layer over MaxLayerBytes; each error says which bound and
// by how much.
func TestPublishRefusesWhatDevicesRefuse(t *testing.T) {
	reg := testoci.Start(t)
	origin, _ := fleetRepo(t, "one", time.Now())

	blob := origin.GitInput(strings.Repeat("a", 1<<20), "hash-object", "-w", "--stdin")
	var tree strings.Builder
	const copies = 520
	for i := 0; i < copies; i++ {
		fmt.Fprintf(&tree, "100644 blob %s\tf%03d.yaml\n", blob, i)
	}
	wide := origin.GitInput("", "commit-tree", origin.GitInput(tree.String(), "mktree"), "-m", "one blob at many paths")
	_, err := ocisource.Publish(context.Background(), openRepo(t, origin.Dir()), wide, "oci://"+reg.Host+"/fleet:wide", ocisource.PublishOptions{Registry: registryOptions(reg.Host)})
	over := int64(copies)*(1<<20+4096) - ocisource.MaxUnpackedBytes
	require.ErrorContains(t, err, fmt.Sprintf("the tree of %s unpacks to %s on a device (%d files and folders of 4.1 kB each, and their bytes), %s over the %s a device unpacks (ocisource.MaxUnpackedBytes)",
		wide, printable.HumanBytes(over+ocisource.MaxUnpackedBytes), copies, printable.HumanBytes(over), printable.HumanBytes(ocisource.MaxUnpackedBytes)))
	require.Zero(t, reg.Requests.Load(), "nothing pushed")

	if testing.Short() || raceEnabled {
		t.Skip("a 65 MiB incompressible layer: a few seconds, a minute under -race")
	}
	data := make([]byte, ocisource.MaxLayerBytes+1<<20)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(data)
	require.NoError(t, os.WriteFile(filepath.Join(origin.Dir(), "noise.bin"), data, 0o644))
	big := origin.Commit("65 MiB of noise")
	_, err = ocisource.Publish(context.Background(), openRepo(t, origin.Dir()), big, "oci://"+reg.Host+"/fleet:big", ocisource.PublishOptions{Registry: registryOptions(reg.Host)})
	require.ErrorContains(t, err, "the layer of "+big+" is 68.")
	require.ErrorContains(t, err, "MB compressed, 1.")
	require.ErrorContains(t, err, "MB over the 67.1 MB a device downloads (ocisource.MaxLayerBytes)")
	require.Zero(t, reg.Requests.Load(), "nothing pushed")
}

// What Publish counts as unpacked is what a device's unpack budget
// charges for the layer.
func TestPublishCountsTheUnpackBudget(t *testing.T) {
	reg := testoci.Start(t)
	origin, _ := fleetRepo(t, "one", time.Now())
	pub := publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	m := annotations(t, reg, "fleet:main")
	img, err := fetchImage(reg, "fleet:main")
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	rc, err := layers[0].Compressed()
	require.NoError(t, err)
	defer rc.Close()
	b := &extract.Budget{Limit: ocisource.MaxUnpackedBytes}
	require.NoError(t, extract.Extract(context.Background(), rc, extract.Gzip, t.TempDir(), b))
	require.Equal(t, b.Written, pub.Unpacked)
	require.Equal(t, m.Layers[0].Size, pub.Size)
}
