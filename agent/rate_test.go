package agent

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
)

// downloads.maxRate caps a model pull, as the registry sees it: 16 MiB at
// 1 MiB/s take at least 14 s from its first byte sent to its last (the
// registry's send buffer kept small, so what it has sent is what tend's
// connection took). The same pull without a cap is timed for the log
// only (no bound on how fast a machine is).
func TestMaxRateCapsModelDownload(t *testing.T) {
	if testing.Short() {
		t.Skip("a 16 s download at 1 MiB/s")
	}
	reg := testoci.StartMetered(t, 64<<10)
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	reg.PushFiles(t, "models/big:v1", map[string][]byte{"model.bin": data})

	var (
		mu          sync.Mutex
		first, last time.Time
		sent        int
	)
	digest := testoci.Digest(data)
	reg.ObserveBlobs(func(r *http.Request, n int) {
		if !strings.HasSuffix(r.URL.Path, "/blobs/"+digest) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if sent == 0 {
			first = now
		}
		sent += n
		last = now
	})
	pull := func(rate string) time.Duration {
		t.Helper()
		mu.Lock()
		sent = 0
		mu.Unlock()
		repo := testgit.NewRepo(t)
		repo.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
			"  models:\n    - {name: big, ref: "+reg.Ref("models/big:v1")+"}\n")
		repo.Commit("big model")
		c := newConfig(t, repo.Dir())
		c.Registries.Insecure = []string{reg.Host}
		if rate != "" {
			r, err := manifest.ParseRate(rate)
			require.NoError(t, err)
			c.Downloads.MaxRate = r
		}
		require.NoError(t, c.Validate())
		if rate == "" {
			require.Zero(t, config.RegistryOptions(c).MaxRate, "no cap: the reads wait for no bucket")
		}
		res, err := (&Reconciler{Config: c}).Apply(t.Context())
		require.NoError(t, err)
		require.GreaterOrEqual(t, res.Downloaded, int64(len(data)), "the model, its manifest and config")
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, len(data), sent, "the registry sent the model once")
		return last.Sub(first)
	}

	unlimited := pull("")
	capped := pull("1MiB/s")
	t.Logf("16 MiB sent by the registry in %s without a cap, in %s at 1MiB/s", unlimited, capped)
	require.GreaterOrEqual(t, capped, 14*time.Second, "downloads.maxRate: 1MiB/s lets 16 MiB through in no less than 14 s")
}
