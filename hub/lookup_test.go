package hub

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

// GET /v1/releases/{name} finds a release by its key, a commit or a
// model's (or service's) digest or tag; says which releases an ambiguous
// name names (409), and what it looked for when it finds none (404).
func TestFindRelease(t *testing.T) {
	const (
		abcd1 = "abcd1" + "111111111111111111111111111111111111"
		abcd2 = "abcd2" + "222222222222222222222222222222222222"
	)
	tracker := "model/tracker@sha256:" + strings.Repeat("f", 64)
	both := api.DigestRelease([]string{string(model120), tracker})
	digest130a, digest130b := "sha256:"+strings.Repeat("1", 64), "sha256:"+strings.Repeat("2", 64)
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		// Each device reports one release it runs, resolved so.
		for i, r := range []struct {
			rev string
			key api.ReleaseKey
			res []api.ReleaseResource
		}{
			{rev1, commit1, detector("1.0.0", digest100)},
			{"main@sha1:" + abcd1, api.CommitRelease(abcd1), nil},
			{"main@sha1:" + abcd2, api.CommitRelease(abcd2), nil},
			{rev1, model110, detector("1.1.0", digest110)},
			{rev1, model120, detector("1.2.0", digest120)},
			{rev1, both, detector("1.2.0", digest120)},
			{rev1, api.ReleaseKey("model/detector@" + digest130a), detector("1.3.0", digest130a)},
			{rev1, api.ReleaseKey("model/detector@" + digest130b), detector("1.3.0", digest130b)},
		} {
			device := "cam-" + string(rune('a'+i))
			h.report(h.token(device), h.agentDoc(device, 0, r.rev, r.key, r.rev, r.key, r.res))
		}
		for _, c := range []struct {
			name string
			code int
			want string // the key found, or what the error says
		}{
			{"commit:" + strings.Repeat("1", 40), http.StatusOK, string(commit1)},
			{"1111", http.StatusOK, string(commit1)},
			{"main@sha1:1111", http.StatusOK, string(commit1)},
			{"HEAD@sha1:" + strings.Repeat("1", 40), http.StatusOK, string(commit1)},
			{"sha1:11111111", http.StatusOK, string(commit1)},
			{"ABCD1", http.StatusOK, "commit:" + abcd1},
			{"abcd", http.StatusConflict, "release abcd: ambiguous: it names 2 releases: commit:" + abcd1 + ", commit:" + abcd2 + ": give more of the hash"},
			{"0000", http.StatusNotFound, "release 0000: not found: no device reported a commit whose hash begins with 0000"},
			{string(model110), http.StatusOK, string(model110)},
			{"model/detector@sha256:1f16", http.StatusOK, string(model110)},
			{"model/detector@1.1.0", http.StatusOK, string(model110)},
			{"model/detector@" + digest120, http.StatusOK, string(model120)},
			{"model/detector@1.2.0", http.StatusOK, string(model120)},
			{tracker, http.StatusOK, string(both)},
			{string(both), http.StatusOK, string(both)},
			{"model/detector@1.3.0", http.StatusConflict, "release model/detector@1.3.0: ambiguous: it names 2 releases: model/detector@" + digest130a + ", model/detector@" + digest130b + ": name one by its digest"},
			{"model/detector@9.9.9", http.StatusNotFound, "release model/detector@9.9.9: not found: no device reported resolving model/detector@9.9.9 to a digest"},
			{"model/reid@0.9.1", http.StatusNotFound, "no release is keyed by model/reid@sha256:eeee"},
			{"service/web@sha256:0000", http.StatusNotFound, "release service/web@sha256:0000: not found: no release is keyed by service/web@sha256:0000"},
			{"model/detector@sha256:zz", http.StatusBadRequest, "the digest is not sha256: and 4 to 64 hex digits"},
			{"latest!", http.StatusBadRequest, `release "latest!": name a release key`},
			{"model/detector@" + digest110 + "+model/x@" + digest120, http.StatusNotFound, "not found: no device reported it"},
			{strings.Repeat("a", api.MaxReleaseKeyBytes+1), http.StatusBadRequest, "release name of 4097 bytes, more than 4096"},
		} {
			t.Run(c.name[:min(len(c.name), 40)], func(t *testing.T) {
				code, body := h.get("/v1/releases/" + url.PathEscape(c.name))
				require.Equal(t, c.code, code, body)
				if code != http.StatusOK {
					assert.Contains(t, body, c.want)
					return
				}
				var rd ReleaseDetail
				h.getJSON("/v1/releases/"+url.PathEscape(c.name), &rd)
				assert.Equal(t, c.want, rd.Key)
			})
		}
		code, page := h.get("/releases/model/detector@1.1.0")
		require.Equal(t, http.StatusOK, code, page)
		assert.Contains(t, page, `<code id="key">`+string(model110)+`</code>`)
		assert.Contains(t, page, `<td class="mono">1.1.0</td>`)
	})
}

// A tag is looked up in every release that resolved it, however many
// did: the tag of model/tracker moved in the 1,002nd release to resolve
// it, and the release of its new digest is found. (The releases are
// recorded as a report records them, in one transaction.)
func TestFindReleaseOfATagMovedLongAfter(t *testing.T) {
	moved := "sha256:" + strings.Repeat("9", 64)
	stores(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		store, err := Open(ctx, dbURL)
		require.NoError(t, err)
		t.Cleanup(func() { store.Close() })
		at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		require.NoError(t, store.tx(ctx, func(tx *sql.Tx) error {
			record := func(key api.ReleaseKey, res []api.ReleaseResource) error {
				at = at.Add(time.Millisecond)
				_, err := store.recordRelease(ctx, tx, key, rev1, keys{target: key, resources: res}, at)
				return err
			}
			for i := range 1001 { // each with the tracker at 2.0.0, as it was
				digest := fmt.Sprintf("sha256:%064x", i+1)
				if err := record(api.ReleaseKey("model/detector@"+digest), detector("1.0.0", digest)); err != nil {
					return err
				}
			}
			res := detector("1.0.0", digest100)
			res[1].Digest = moved
			return record(api.ReleaseKey("model/tracker@"+moved), res)
		}))

		key, err := store.FindRelease(ctx, "model/tracker@2.0.0")
		require.NoError(t, err)
		assert.Equal(t, "model/tracker@"+moved, string(key))
	})
}
