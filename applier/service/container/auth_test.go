package container_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/stretchr/testify/require"

	tc "github.com/tend-dev/tend/applier/service/container"
)

// keychain gives one user's credentials for every registry.
type keychain struct{ user, pass string }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: k.user, Password: k.pass}, nil
}

// The engine pulls from a registry that wants credentials with those the
// keychain gives (registries.dockerConfig); without them the error says
// where to set them, and is worth retrying (not an invalid instance).
func TestPullWithCredentials(t *testing.T) {
	e := setup(t)
	e.reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
		if u, p, ok := r.BasicAuth(); ok && u == "tend" && p == "s3cret" {
			return false
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
		return true
	})
	ctx := context.Background()

	_, err := e.rt.Run(ctx, e.instance("edge-1", "web"))
	require.Error(t, err)
	t.Log(err)
	require.False(t, errorsIsInvalid(err), "%v", err)
	require.Contains(t, err.Error(), "registries.dockerConfig")

	rt, err := tc.New(tc.Options{Host: e.rt.Host(), Keychain: keychain{"tend", "s3cret"}})
	require.NoError(t, err)
	defer rt.Close()
	p, err := rt.Run(ctx, e.instance("edge-1", "web"))
	require.NoError(t, err)
	defer rt.Stop(ctx, p, 0)
	require.True(t, rt.Alive(p))
}
