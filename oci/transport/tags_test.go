package transport

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileTags serves /v2/ and, for the tags of models/m, what page
// writes; it counts the tag list requests.
func hostileTags(t *testing.T, page func(w http.ResponseWriter, r *http.Request, n int64)) (string, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/models/m/tags/list" {
			page(w, r, n.Add(1))
			return
		}
		w.WriteHeader(http.StatusOK) // the /v2/ ping
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &n
}

// TestListTagsIsBounded: a semver policy lists tags every tick; a registry
// that pages forever, lists too many tags or sends one endless page fails
// the listing with an error that says so, after a bounded number of
// requests and bytes, instead of taking the agent's memory.
func TestListTagsIsBounded(t *testing.T) {
	tests := []struct {
		name     string
		page     func(w http.ResponseWriter, r *http.Request, n int64)
		want     string
		requests int64
	}{
		{"pages forever", func(w http.ResponseWriter, r *http.Request, n int64) {
			w.Header().Set("Link", fmt.Sprintf(`</v2/models/m/tags/list?n=1&last=%d>; rel="next"`, n))
			fmt.Fprintf(w, `{"name":"models/m","tags":["1.0.%d"]}`, n)
		}, "goes on past 100 pages (100 tags so far); the registry may be paging in a loop", MaxTagPages},
		{"too many tags", func(w http.ResponseWriter, r *http.Request, n int64) {
			w.Header().Set("Link", fmt.Sprintf(`</v2/models/m/tags/list?n=1&last=%d>; rel="next"`, n))
			tags := make([]string, 30_000)
			for i := range tags {
				tags[i] = fmt.Sprintf(`"%d.%d.0"`, n, i)
			}
			fmt.Fprintf(w, `{"name":"models/m","tags":[%s]}`, strings.Join(tags, ","))
		}, "exceeds 100000 tags; pin the model by tag or digest instead of a policy", 4},
		{"one endless page", func(w http.ResponseWriter, r *http.Request, n int64) {
			fmt.Fprint(w, `{"name":"models/m","tags":["`)
			chunk := strings.Repeat("x", 64<<10)
			for range 2 * MaxTagPageBytes / len(chunk) {
				if _, err := fmt.Fprint(w, chunk); err != nil {
					return // the client stopped reading
				}
			}
		}, fmt.Sprintf("is over %d bytes", MaxTagPageBytes), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, requests := hostileTags(t, tt.page)
			_, err := Resolve(context.Background(), host+"/models/m", ">=1.0.0", Options{Insecure: []string{host}})
			require.ErrorIs(t, err, errTagListTooLarge)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, tt.requests, requests.Load(), "tag list requests")
		})
	}
}

// What a registry lists is quoted in errors, never whole: each item is
// cut, and a long list says how many more it has (an error is logged
// every tick and kept in status; see printable.ShortList).
func TestErrorsQuoteListsShort(t *testing.T) {
	long := strings.Repeat("v", 1<<20)
	host, _ := hostileTags(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		fmt.Fprintf(w, `{"name":"models/m","tags":["%s1","%s2","%s3"]}`, long, long, long)
	})
	_, err := Resolve(context.Background(), host+"/models/m", ">=1.0.0", Options{Insecure: []string{host}})
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, "(1048577 bytes)")
	require.Less(t, len(err.Error()), 2000, "three 1 MiB tags are not repeated: %.200s", err)
}
