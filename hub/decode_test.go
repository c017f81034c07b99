package hub

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reportSeed is a report of testdata/reports: ok-*.json taken, bad-*.json
// refused, each posted by cam-1.
type reportSeed struct {
	name string
	body []byte
}

func reportSeeds(t testing.TB) []reportSeed {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "reports", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []reportSeed
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out = append(out, reportSeed{filepath.Base(f), b})
	}
	return out
}

func TestDecodeReportSeeds(t *testing.T) {
	for _, seed := range reportSeeds(t) {
		name, body := seed.name, seed.body
		t.Run(name, func(t *testing.T) {
			st, result, err := decodeReport(body, "cam-1")
			if strings.HasPrefix(name, "ok-") {
				require.NoError(t, err)
				assert.Empty(t, result)
				assert.Equal(t, "cam-1", st.Device)
				return
			}
			require.Error(t, err)
			assert.Nil(t, st)
			assert.Contains(t, []string{ResultMalformed, ResultForbidden}, result)
		})
	}
}

// FuzzDecodeReport: whatever a device posts, decodeReport takes it or
// refuses it with a result and an error, and never panics; what it takes
// is the token's device's, ordered, and reads back the same once stored
// (the hub keeps it re-encoded, and decodes it as the next report's
// previous one).
func FuzzDecodeReport(f *testing.F) {
	for _, seed := range reportSeeds(f) {
		f.Add(seed.body)
	}
	f.Add([]byte(`{"formatVersion": "1", "device": "cam-1", "lastReconcile": "2026-12-03T12:00:00Z"} {}`))
	f.Add([]byte(`{"formatVersion": "1", "device": "cam-1", "lastReconcile": "9999-12-31T23:59:59.999999999+14:00", "reportSeq": {"epoch": "-", "seq": 0}}`))
	f.Add([]byte(`{"formatVersion": "1", "device": "cam-1", "lastReconcile": "0000-01-01T00:00:00-23:59", "reportSeq": null}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		st, result, err := decodeReport(body, "cam-1")
		if err != nil {
			if st != nil || (result != ResultMalformed && result != ResultForbidden) {
				t.Fatalf("refused with status %v, result %q: %v", st, result, err)
			}
			return
		}
		if result != "" || st == nil || st.Device != "cam-1" {
			t.Fatalf("taken with result %q, status %+v", result, st)
		}
		ord, err := orderOf(st)
		if err != nil {
			t.Fatalf("taken, and orderOf refuses it: %v", err)
		}
		stored, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("taken, and does not encode: %v", err)
		}
		again, _, err := decodeReport(stored, "cam-1")
		if err != nil {
			t.Fatalf("stored as %s, it reads back refused: %v", stored, err)
		}
		if ord2, _ := orderOf(again); ord2 != ord {
			t.Fatalf("stored as %s, it reads back at %+v, not %+v", stored, ord2, ord)
		}
		if restored, _ := json.Marshal(again); string(restored) != string(stored) {
			t.Fatalf("stored as %s, it reads back as %s", stored, restored)
		}
	})
}
