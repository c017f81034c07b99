package container

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/tend-dev/tend/applier/service"
)

// ensureImage pulls in.Image unless the engine has it. An image the
// registry does not have (or a reference that does not parse) is a
// service.ErrInvalidInstance error naming it; an unreachable registry is
// worth retrying.
func (r *Runtime) ensureImage(ctx context.Context, in Instance) error {
	_, err := r.cli.ImageInspect(ctx, in.Image)
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return r.engineError(fmt.Errorf("service %s: inspect image %s: %w", in.Service, in.Image, err))
	}
	return r.Pull(ctx, in.Service, in.Image)
}

// EnsureImage pulls image for svc unless the engine has it already.
func (r *Runtime) EnsureImage(ctx context.Context, svc, image string) error {
	return r.ensureImage(ctx, Instance{Service: svc, Image: image})
}

// Pull has the engine pull image (image@digest or a tag), with the
// credentials the keychain gives for its registry.
func (r *Runtime) Pull(ctx context.Context, svc, image string) error {
	ref, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		return service.Invalidf("service %s: image %q: %v: fix image in the manifest", svc, image, err)
	}
	auth, err := r.registryAuth(ref)
	if err != nil {
		return fmt.Errorf("service %s: credentials for %s: %w (check registries.dockerConfig)", svc, ref.Context().RegistryStr(), err)
	}
	resp, err := r.cli.ImagePull(ctx, image, client.ImagePullOptions{RegistryAuth: auth})
	if err == nil {
		err = resp.Wait(ctx)
		_ = resp.Close()
	}
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return r.engineError(fmt.Errorf("service %s: pull %s: %w", svc, image, err))
	case strings.Contains(err.Error(), "no matching manifest"):
		return service.Invalidf("service %s: image %s has no build for this node's platform, linux/%s: push one for it, or pin a tag that has one (%v)", svc, image, runtime.GOARCH, err)
	case cerrdefs.IsNotFound(err):
		return service.Invalidf("service %s: image %s does not exist in its registry: push it, or fix image in the manifest (%v)", svc, image, err)
	case isAuthError(err):
		return fmt.Errorf("service %s: pull %s: %w: check registries.dockerConfig or run docker login on the device", svc, image, err)
	}
	return r.engineError(fmt.Errorf("service %s: pull %s: %w", svc, image, err))
}

// isAuthError reports whether a pull failed for want of (valid)
// credentials. Docker 20.10 answers a registry's 401 with a plain server
// error saying "no basic auth credentials", hence the messages.
func isAuthError(err error) bool {
	if cerrdefs.IsUnauthorized(err) || cerrdefs.IsPermissionDenied(err) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"no basic auth credentials", "unauthorized", "authentication required", "denied"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// registryAuth is the X-Registry-Auth value for ref's registry, "" for
// anonymous.
func (r *Runtime) registryAuth(ref name.Reference) (string, error) {
	if r.kc == nil {
		return "", nil
	}
	a, err := r.kc.Resolve(ref.Context())
	if err != nil {
		return "", err
	}
	if a == authn.Anonymous {
		return "", nil
	}
	c, err := a.Authorization()
	if err != nil {
		return "", err
	}
	return authconfig.Encode(registry.AuthConfig{
		Username:      c.Username,
		Password:      c.Password,
		Auth:          c.Auth,
		IdentityToken: c.IdentityToken,
		RegistryToken: c.RegistryToken,
		ServerAddress: ref.Context().RegistryStr(),
	})
}
