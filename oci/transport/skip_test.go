package transport

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/require"
)

// ResolveSkipping walks the tags in range highest first and takes the
// first one skip lets through, listing those it passed over; an error of
// skip stops the walk.
func TestResolveSkipping(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := host + "/models/m"
	d100 := push(t, repo, "1.0.0")
	d110 := push(t, repo, "1.1.0")
	d120 := push(t, repo, "1.2.0")
	push(t, repo, "2.0.0")
	opts := Options{Insecure: []string{host}}
	stop := errors.New("stop")

	tests := []struct {
		name    string
		refuse  map[string]error // by digest: nil passes over, stop stops
		tag     string
		skipped []string // tags, highest first
		asked   []string // of skip, in order
		err     error
	}{
		{"nothing refused", nil, "1.2.0", nil, []string{"1.2.0"}, nil},
		{"the highest refused", map[string]error{d120: nil}, "1.1.0", []string{"1.2.0"}, []string{"1.2.0", "1.1.0"}, nil},
		{"all refused", map[string]error{d120: nil, d110: nil, d100: nil}, "", []string{"1.2.0", "1.1.0", "1.0.0"}, []string{"1.2.0", "1.1.0", "1.0.0"}, nil},
		{"an error stops the walk", map[string]error{d120: nil, d110: stop}, "", []string{"1.2.0"}, []string{"1.2.0", "1.1.0"}, stop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			got, skipped, err := ResolveSkipping(context.Background(), repo, ">=1.0.0 <2", opts, func(_ context.Context, r Resolved) (bool, error) {
				require.Equal(t, repo, r.Ref)
				asked = append(asked, r.Tag)
				why, ok := tt.refuse[r.Digest]
				return ok, why
			})
			require.ErrorIs(t, err, tt.err)
			require.Equal(t, tt.tag, got.Tag)
			var tags []string
			for _, s := range skipped {
				tags = append(tags, s.Tag)
			}
			require.Equal(t, tt.skipped, tags)
			require.Equal(t, tt.asked, asked, "each tag asked once, highest first, none after the one taken")
		})
	}
}
