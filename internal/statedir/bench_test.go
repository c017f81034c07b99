package statedir_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
)

// BenchmarkMigrate migrates a stateDir of format 1 the size of a busy
// node's: the fixture's records plus 300 tar layers kept as trees (each
// record listing 20 files), every file copied aside, rewritten and synced
// once: what the first start of an upgraded tend adds.
func BenchmarkMigrate(b *testing.B) {
	entry := `{"name":"models/part-%d.bin","type":"file","mode":420,"size":1048576,"digest":"sha256:%064d","file":"%d"}`
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d := fixture(b)
		for l := 0; l < 300; l++ {
			dir := filepath.Join(string(d), "blobs", "trees", "sha256", fmt.Sprintf("%064x", l))
			require.NoError(b, os.MkdirAll(dir, 0o755))
			var es []string
			for f := 0; f < 20; f++ {
				es = append(es, fmt.Sprintf(entry, f, f, f))
			}
			rec := fmt.Sprintf(`{"digest":"sha256:%064x","entries":[%s]}`, l, strings.Join(es, ","))
			require.NoError(b, os.WriteFile(filepath.Join(dir, statedir.TreeRecordFile), []byte(rec), 0o444))
		}
		b.StartTimer()
		mig, err := d.Migrate("v0.1.0", "c")
		require.NoError(b, err)
		require.NotEmpty(b, mig.Copy)
	}
}
