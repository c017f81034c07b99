package transport

import (
	"fmt"
	"os"

	"github.com/docker/cli/cli/config"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// Keychain returns the credentials tend uses for registries: those in the
// docker config.json at dockerConfig first (registries.dockerConfig), then
// the default docker keychain ($DOCKER_CONFIG or ~/.docker/config.json).
// An empty dockerConfig means the default keychain alone.
func Keychain(dockerConfig string) authn.Keychain {
	if dockerConfig == "" {
		return authn.DefaultKeychain
	}
	return authn.NewMultiKeychain(configKeychain{path: dockerConfig}, authn.DefaultKeychain)
}

// configKeychain reads one docker config.json, at every lookup, so a
// rotated credential is used at the next tick without a restart.
type configKeychain struct{ path string }

func (k configKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	f, err := os.Open(k.path)
	if err != nil {
		return nil, fmt.Errorf("registries.dockerConfig: %w", err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("registries.dockerConfig %s: %w", k.path, err)
	}
	key := target.RegistryStr()
	if key == name.DefaultRegistry {
		key = authn.DefaultAuthKey
	}
	c, err := cf.GetAuthConfig(key)
	if err != nil {
		return nil, fmt.Errorf("registries.dockerConfig %s: credentials for %s: %w", k.path, key, err)
	}
	if c.Username == "" && c.Password == "" && c.Auth == "" && c.IdentityToken == "" && c.RegistryToken == "" {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: c.Username, Password: c.Password, Auth: c.Auth,
		IdentityToken: c.IdentityToken, RegistryToken: c.RegistryToken}), nil
}
